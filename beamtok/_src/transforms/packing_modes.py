"""The packing modes, one class each, registered by the name a spec stores (``PackSpec.mode``).

A mode owns everything that differs between modes: the checks on its fields, the JSON a spec
fingerprints, the packer that makes its rows, its description in words, how the option table
(``beamtok cache --pack``, data configs) applies it to a dataset, and what it can do (cut rows
by token offset, carry labels, give rows of one width). Nothing else switches over mode names.

The names the option table takes for a mode, and a spec's packing in words, are in
``packing_names.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.sizes import MAX_SEQ_LEN, MAX_WINDOW, ROW_BYTES_PER_TOKEN, check_ceiling
from beamtok._src.base.validate import check_choice, check_int, check_optional_int
from beamtok._src.transforms.best_fit import BestFitPacker
from beamtok._src.transforms.pack import (
    FirstFitPacker,
    GreedyPacker,
    Packer,
    PadTruncate,
    SlidingWindow,
    WholeDocument,
)
from beamtok._src.transforms.power_of_two import PowerOfTwoRows

__all__ = [
    "PACKING_MODES",
    "PackSpec",
    "PackingMode",
    "make_packer",
    "packing_mode",
]

LONG_DOCUMENT_POLICIES = ("split", "truncate")
PackMode = Literal["concat", "pad", "window", "none", "greedy", "first_fit", "best_fit", "power_of_two"]
Remainder = Literal["pad", "drop", "keep"]


class PackableDataset(Protocol):
    """The packing stages of ``beamtok.Dataset`` (the stream layer, above this one)."""

    def concat_chunk(self, seq_len: int, *, remainder: str = ...) -> Any: ...
    def pad(self, seq_len: int) -> Any: ...
    def sliding_window(self, seq_len: int, *, stride: int | None = ...) -> Any: ...
    def pack_examples(self, seq_len: int, *, method: str = ..., window: int = ...) -> Any: ...
    def pack_documents(
        self, seq_len: int, *, method: str = ..., window: int = ..., long_docs: str = ..., bos: bool = ...
    ) -> Any: ...
    def pack_power_of_two(self, max_len: int, *, min_len: int = ...) -> Any: ...


D = TypeVar("D", bound=PackableDataset)


class PackingMode:
    """One way token documents become rows. Subclasses set the class attributes and override
    what differs; the defaults describe a mode with rows of ``seq_len`` and no other field."""

    NAME: ClassVar[str]  # what a spec stores and fingerprints
    API: ClassVar[str]  # the Dataset method that asks for it
    ALIASES: ClassVar[tuple[str, ...]] = ()  # other names the command line accepts
    CUTS_BY_TOKEN_OFFSET: ClassVar[bool] = (
        False  # rows are a function of token offsets: packed range by range, column-wise
    )
    SUPERVISED: ClassVar[bool] = False  # rows carry labels and an attention mask
    HAS_SEQ_LEN: ClassVar[bool] = True  # rows hold at most seq_len tokens (needs tokens; padding rows can be made)
    # what a row's ``token`` says: "tokens" (how far into its first piece's document the row
    # starts) or "window_rows" (the row's number in its packing window, every piece a document
    # or a piece the packer cut from one on its own)
    ROW_TOKEN: ClassVar[str] = "tokens"
    WHOLE_PIECES: ClassVar[bool] = False  # every piece of a row is a whole document or example

    @classmethod
    def check(cls, pack: PackSpec) -> None:
        """Refuse fields this mode cannot use (a ConfigError naming the field); ``PackSpec``
        has checked ``seq_len`` where the mode has one."""
        cls._refuse_unused(pack)

    @classmethod
    def _refuse_unused(cls, pack: PackSpec) -> None:
        if pack.long_docs is not None or pack.bos_id is not None:
            raise ConfigError(f"long_docs and bos_id apply to best_fit packing only, not {cls.NAME}")

    @classmethod
    def to_json(cls, pack: PackSpec) -> dict[str, Any]:
        """The fields a spec fingerprints (the same keys for every mode but best_fit, so the
        fingerprints of specs written before best_fit stay as they were)."""
        return {
            "mode": pack.mode,
            "seq_len": pack.seq_len,
            "pad_id": pack.pad_id,
            "stride": pack.stride,
            "remainder": pack.remainder,
            "window": pack.window,
        }

    @classmethod
    def packer(cls, pack: PackSpec) -> Packer:
        raise NotImplementedError

    @classmethod
    def words(cls, pack: Mapping[str, Any]) -> str:
        """A spec's JSON form of this mode in words, named as the Dataset method that asks for it."""
        return cls.called() + (f", rows of {pack['seq_len']} tokens" if pack.get("seq_len") else "")

    @classmethod
    def called(cls) -> str:
        """The Dataset method (and method= where one method makes two modes) that asks for this mode."""
        return f"{cls.API}(method={cls.NAME})" if cls.API == "pack_examples" else cls.API

    @classmethod
    def cursor_words(cls) -> str | None:
        """What a cursor's numbers mean inside a row of this mode, where it is not plain."""
        return None

    @classmethod
    def from_options(cls, ds: D, options: Mapping[str, Any]) -> D:
        """``ds`` packed as the option table's entries ask (``seq_len``, ``stride``...)."""
        raise NotImplementedError


class WholeDocuments(PackingMode):
    NAME = API = "none"
    HAS_SEQ_LEN = False
    WHOLE_PIECES = True

    @classmethod
    def check(cls, pack: PackSpec) -> None:
        cls._refuse_unused(pack)

    @classmethod
    def packer(cls, pack: PackSpec) -> Packer:
        return WholeDocument()

    @classmethod
    def words(cls, pack: Mapping[str, Any]) -> str:
        return "none, one whole document a row"

    @classmethod
    def from_options(cls, ds: D, options: Mapping[str, Any]) -> D:
        return ds


class ConcatChunk(PackingMode):
    NAME, API, ALIASES = "concat", "concat_chunk", ("concat",)
    CUTS_BY_TOKEN_OFFSET = True

    @classmethod
    def packer(cls, pack: PackSpec) -> Packer:
        raise ConfigError(
            "concat_chunk is cut column-wise by beamtok._src.shards.column_chunker (beamtok._src.shards.packing.packed), not a row at a time"
        )

    @classmethod
    def from_options(cls, ds: D, options: Mapping[str, Any]) -> D:
        return ds.concat_chunk(options["seq_len"], remainder=options["remainder"])


class Pad(PackingMode):
    NAME = API = "pad"

    @classmethod
    def packer(cls, pack: PackSpec) -> Packer:
        return PadTruncate(pack.seq_len or 0, pack.pad_id)

    @classmethod
    def from_options(cls, ds: D, options: Mapping[str, Any]) -> D:
        return ds.pad(options["seq_len"])


class Window(PackingMode):
    NAME, API, ALIASES = "window", "sliding_window", ("window",)
    SUPERVISED = True  # overlapped tokens are masked out of the loss

    @classmethod
    def check(cls, pack: PackSpec) -> None:
        super().check(pack)
        assert pack.seq_len is not None
        if not isinstance(pack.stride, int) or not 0 < pack.stride <= pack.seq_len:
            raise ConfigError(f"stride must be an integer in 1..seq_len ({pack.seq_len}), got {pack.stride!r}")

    @classmethod
    def packer(cls, pack: PackSpec) -> Packer:
        return SlidingWindow(pack.seq_len or 0, pack.stride or 0)

    @classmethod
    def words(cls, pack: Mapping[str, Any]) -> str:
        return super().words(pack) + f", a window every {pack.get('stride')} tokens"

    @classmethod
    def from_options(cls, ds: D, options: Mapping[str, Any]) -> D:
        return ds.sliding_window(options["seq_len"], stride=options.get("stride"))


class Greedy(PackingMode):
    NAME, API, ALIASES = "greedy", "pack_examples", ("greedy",)
    WHOLE_PIECES = True

    @classmethod
    def packer(cls, pack: PackSpec) -> Packer:
        return GreedyPacker(pack.seq_len or 0, pack.pad_id)

    @classmethod
    def from_options(cls, ds: D, options: Mapping[str, Any]) -> D:
        return ds.pack_examples(options["seq_len"], method="greedy")


class _Windowed(PackingMode):
    ROW_TOKEN = "window_rows"

    """A mode that packs over windows of ``window`` units (examples or documents)."""

    UNIT: ClassVar[str]
    DEFAULT_WINDOW: ClassVar[int]

    @classmethod
    def check(cls, pack: PackSpec) -> None:
        check_int(pack.window, f"{cls.NAME} packing window ({cls.UNIT})", minimum=1)
        assert pack.window is not None
        check_ceiling(pack.window, f"{cls.NAME} packing window", MAX_WINDOW, cls.UNIT)

    @classmethod
    def words(cls, pack: Mapping[str, Any]) -> str:
        return super().words(pack) + f", windows of {pack.get('window')} {cls.UNIT}"

    @classmethod
    def cursor_words(cls) -> str | None:
        return (
            "a cursor's token offset is the number of the window's next row, its doc cursor the window's first document"
        )


class FirstFit(_Windowed):
    NAME, API, ALIASES = "first_fit", "pack_examples", ("first_fit",)
    WHOLE_PIECES = True
    UNIT, DEFAULT_WINDOW = "examples", 64

    @classmethod
    def check(cls, pack: PackSpec) -> None:
        super().check(pack)
        cls._refuse_unused(pack)

    @classmethod
    def packer(cls, pack: PackSpec) -> Packer:
        return FirstFitPacker(pack.seq_len or 0, pack.pad_id, pack.window or 0)

    @classmethod
    def from_options(cls, ds: D, options: Mapping[str, Any]) -> D:
        return ds.pack_examples(
            options["seq_len"], method="first_fit", window=options.get("pack_window") or cls.DEFAULT_WINDOW
        )


class BestFit(_Windowed):
    NAME, API, ALIASES = "best_fit", "pack_documents", ("best_fit",)
    UNIT, DEFAULT_WINDOW = "documents", 256

    @classmethod
    def check(cls, pack: PackSpec) -> None:
        super().check(pack)
        check_choice(pack.long_docs, "long_docs", LONG_DOCUMENT_POLICIES)
        check_optional_int(pack.bos_id, "bos_id")
        if pack.bos_id is not None and (pack.seq_len or 0) < 2:
            raise ConfigError(f"rows that start with BOS need seq_len >= 2, got {pack.seq_len}")

    @classmethod
    def to_json(cls, pack: PackSpec) -> dict[str, Any]:
        return {**super().to_json(pack), "long_docs": pack.long_docs, "bos_id": pack.bos_id}

    @classmethod
    def packer(cls, pack: PackSpec) -> Packer:
        return BestFitPacker(pack.seq_len or 0, pack.pad_id, pack.window or 0, pack.long_docs or "split", pack.bos_id)

    @classmethod
    def words(cls, pack: Mapping[str, Any]) -> str:
        words = super().words(pack) + f", long documents {pack.get('long_docs')}"
        if pack.get("bos_id") is not None:
            words += f", every row starts with BOS (token {pack['bos_id']})"
        return words

    @classmethod
    def from_options(cls, ds: D, options: Mapping[str, Any]) -> D:
        window = options.get("pack_window") or cls.DEFAULT_WINDOW
        return ds.pack_documents(
            options["seq_len"], window=window, long_docs=options["long_docs"], bos=bool(options.get("bos_rows"))
        )


class PowerOfTwo(PackingMode):
    """Rows of power-of-two lengths from ``min_len`` to ``seq_len`` (a spec stores ``min_len``
    in its ``window`` field, as specs written before this class did)."""

    NAME, API, ALIASES = "power_of_two", "pack_power_of_two", ("power_of_two",)

    @classmethod
    def check(cls, pack: PackSpec) -> None:
        for name, value in (("max_len", pack.seq_len), ("min_len", pack.window)):
            check_int(value, name, minimum=1)
            assert value is not None
            if value & (value - 1):
                raise ConfigError(f"{name} must be a power of two, got {value}")
        if (pack.window or 0) > (pack.seq_len or 0):
            raise ConfigError(f"min_len {pack.window} is above max_len {pack.seq_len}")
        cls._refuse_unused(pack)

    @classmethod
    def packer(cls, pack: PackSpec) -> Packer:
        return PowerOfTwoRows(pack.seq_len or 0, pack.window or 1)

    @classmethod
    def words(cls, pack: Mapping[str, Any]) -> str:
        return f"{cls.API}, unpadded rows of {pack.get('window')} to {pack.get('seq_len')} tokens"

    @classmethod
    def from_options(cls, ds: D, options: Mapping[str, Any]) -> D:
        return ds.pack_power_of_two(options["seq_len"], min_len=options.get("min_len") or 64)


PACKING_MODES: dict[str, type[PackingMode]] = {
    mode.NAME: mode for mode in (ConcatChunk, Pad, Window, WholeDocuments, Greedy, FirstFit, BestFit, PowerOfTwo)
}


def packing_mode(name: str) -> type[PackingMode]:
    """The mode a spec names; a ConfigError for a name no mode has."""
    check_choice(name, "packing mode", tuple(PACKING_MODES))
    return PACKING_MODES[name]


def make_packer(pack: PackSpec | None) -> Packer:
    """The packer a spec asks for.

    Args:
        pack: The packing spec; None gives one whole document a row.
    """
    return WholeDocument() if pack is None else packing_mode(pack.mode).packer(pack)


@dataclass(frozen=True)
class PackSpec:
    """How token documents become rows.

    ``concat``: concatenate documents and cut rows of ``seq_len``; ``pad``: one document a row,
    truncated and padded to ``seq_len``; ``window``: one document cut into windows of
    ``seq_len`` starting every ``stride`` tokens; ``none``: one whole document a row;
    ``greedy`` / ``first_fit``: whole examples packed into padded rows of ``seq_len``, in order
    or first-fit over windows of ``window`` examples (examples longer than ``seq_len`` are
    skipped and counted as ``too_long``); ``best_fit``: whole documents packed best-fit
    decreasing over windows of ``window`` documents, a longer one split into ``seq_len``
    pieces or truncated (``long_docs``), every piece starting with ``bos_id`` when it is set;
    ``power_of_two``: each document cut into rows of power-of-two lengths from ``window`` (the
    shortest) to ``seq_len`` (the longest), unpadded.
    """

    mode: PackMode
    seq_len: int | None
    pad_id: int
    stride: int | None = None
    remainder: Remainder = "pad"
    window: int | None = None
    long_docs: str | None = None  # best_fit only: "split" or "truncate"
    bos_id: int | None = None  # best_fit only: every row starts with this token

    def __post_init__(self) -> None:
        mode = packing_mode(self.mode)
        if mode.HAS_SEQ_LEN:
            check_int(self.seq_len, "seq_len", minimum=1)
            assert self.seq_len is not None
            check_ceiling(self.seq_len, "seq_len", MAX_SEQ_LEN, "tokens", bytes_each=ROW_BYTES_PER_TOKEN)
        mode.check(self)
        check_choice(self.remainder, "remainder", ("pad", "drop", "keep"))

    @property
    def packing(self) -> type[PackingMode]:
        """The class of this spec's mode: its packer, checks, words and capabilities."""
        return packing_mode(self.mode)

    def to_json(self) -> dict[str, Any]:
        return self.packing.to_json(self)
