"""Fast tokenizers: loading, fingerprinting and batched encoding through the Rust backend."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.gc_pause import gc_paused
from beamtok._src.engines.engine import Engine
from beamtok._src.engines.engine_choice import EngineChoice, choose
from beamtok._src.engines.id_arrays import int32_ids
from beamtok._src.transforms.engine_option import engine_mode
from beamtok._src.transforms.length_settings import without_length_settings
from beamtok._src.transforms.loaded_tokenizers import LoadedTokenizer

log = logging.getLogger(__name__)

__all__ = ["Tokenizer", "TokenizerRef"]


@dataclass(frozen=True)
class TokenizerRef:
    """Which tokenizer to load, and the fingerprint its files must have."""

    name: str
    fingerprint: str
    bos_id: int | None
    eos_id: int | None
    pad_id: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fingerprint": self.fingerprint,
            "bos_id": self.bos_id,
            "eos_id": self.eos_id,
            "pad_id": self.pad_id,
        }


_BUILDING = threading.RLock()  # one fast-path build at a time: threads asking at once wait for it, not build it again


def _renew_lock() -> None:
    """In a forked child: a new lock, for another thread of the parent may have held it at the fork."""
    global _BUILDING
    _BUILDING = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_lock)


class Tokenizer:
    """A fast tokenizer, used through its Rust backend (``tokenizers.Tokenizer``).

    Encoding calls ``encode_batch_fast`` (no offsets), so the per-token work stays in Rust.
    Build one with :func:`load_tokenizer`, or from its serialized form with
    :meth:`from_serialized` (what remote Beam workers and cache readers do).
    """

    def __init__(
        self,
        backend: Any,
        name: str,
        bos_id: int | None,
        eos_id: int | None,
        pad_id: int | None,
        hf: Any = None,
        *,
        vocab_size: int | None = None,
        chat_template: str | None = None,
        directory: str | None = None,
    ) -> None:
        """Use :func:`load_tokenizer` rather than this; the arguments are what it finds.

        Args:
            backend: The ``tokenizers.Tokenizer``.
            name: The name it was loaded by (a directory or hub name).
            bos_id: The BOS token id, or None.
            eos_id: The EOS token id, or None.
            pad_id: The padding id (None: EOS, else 0).
            hf: The ``transformers`` tokenizer, where one is loaded.
            vocab_size: The vocabulary with added tokens (None: the backend's).
            chat_template: The tokenizer's chat template, if any.
            directory: Where ``hf`` is loaded from when first asked for.
        """
        self.name = name
        self.backend = without_length_settings(backend, name)
        self._hf = hf
        self._directory = directory  # where ``hf`` is loaded from when first asked for
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.pad_id: int = pad_id if pad_id is not None else (eos_id if eos_id is not None else 0)
        self.vocab_size: int = vocab_size if vocab_size is not None else backend.get_vocab_size(with_added_tokens=True)
        self._chat_template = chat_template
        self._choice: EngineChoice | None = None  # the engine that encodes, once chosen
        serialized = self.backend.to_str()
        specials = json.dumps([self.bos_id, self.eos_id, self.pad_id])
        self.fingerprint = hashlib.sha256((serialized + specials).encode()).hexdigest()[:20]
        self._serialized: str | None = (
            serialized  # kept until the fast path is built from it (to_str is slow on a large vocabulary)
        )
        self._shipped: dict[str, Any] | None = None  # serialize()'s blob, once asked for

    def __getstate__(self) -> dict[str, Any]:
        # the fast path's native engines (kitoken, bpe-openai) cannot be pickled: a copy
        # rebuilds its encoder, with the same checks, when it first encodes
        state = self.__dict__.copy()
        state["_choice"] = None
        state["_serialized"] = None
        state["_shipped"] = None
        return state

    @classmethod
    def from_loaded(cls, loaded: LoadedTokenizer, name: str, directory: str) -> Tokenizer:
        """The tokenizer ``transformers`` made of ``directory`` when it was kept on this machine
        (:mod:`beamtok._src.transforms.loaded_tokenizers`), without importing ``transformers``.

        Args:
            loaded: What ``transformers`` made of the directory, as kept.
            name: The name to give it.
            directory: The directory.
        Returns:
            The Tokenizer.
        """
        from tokenizers import Tokenizer as RustTokenizer

        backend = RustTokenizer.from_str(loaded.backend_json)
        return cls(
            backend,
            name,
            loaded.bos_id,
            loaded.eos_id,
            loaded.pad_id,
            vocab_size=loaded.vocab_size,
            chat_template=loaded.chat_template,
            directory=directory,
        )

    @property
    def hf(self) -> Any:
        """The ``transformers`` tokenizer, or None for one rebuilt from its serialized form; one
        read back from this machine's kept tokenizers loads it from its directory when asked."""
        if self._hf is None and self._directory is not None:
            from transformers import AutoTokenizer

            self._hf = AutoTokenizer.from_pretrained(self._directory)
        return self._hf

    @classmethod
    def from_hf(cls, hf_tokenizer: Any, name: str) -> Tokenizer:
        """Wrap a loaded ``transformers`` fast tokenizer.

        Args:
            hf_tokenizer: A loaded ``transformers`` fast tokenizer.
            name: The name to give it.
        Returns:
            The Tokenizer.
        Raises:
            ConfigError: The tokenizer is not a fast (Rust) one.
        """
        if not getattr(hf_tokenizer, "is_fast", False):
            raise ConfigError(f"tokenizer {name!r} is not a fast (Rust) tokenizer")
        template = getattr(hf_tokenizer, "chat_template", None)
        return cls(
            hf_tokenizer.backend_tokenizer,
            name,
            hf_tokenizer.bos_token_id,
            hf_tokenizer.eos_token_id,
            hf_tokenizer.pad_token_id,
            hf_tokenizer,
            vocab_size=len(hf_tokenizer),
            chat_template=template if isinstance(template, str) else None,
        )

    def kept_form(self) -> LoadedTokenizer:
        """What :mod:`beamtok._src.transforms.loaded_tokenizers` keeps of this tokenizer."""
        return LoadedTokenizer(
            self._serialized or self.backend.to_str(),
            self.bos_id,
            self.eos_id,
            self.pad_id,
            self.vocab_size,
            self._chat_template,
        )

    def serialize(self) -> dict[str, Any]:
        """Everything needed to rebuild this tokenizer exactly, as JSON.

        Made once and kept: a process that ships a tokenizer (a launcher, to each Beam build's
        workers) would otherwise write its whole file again each time; one that never ships
        it keeps no copy (the file's text is dropped once the engine is built from it)."""
        if self._shipped is None:
            self._shipped = {
                "name": self.name,
                "tokenizer_json": self._serialized or self.backend.to_str(),
                "bos_id": self.bos_id,
                "eos_id": self.eos_id,
                "pad_id": self.pad_id,
                "fingerprint": self.fingerprint,
            }
        return dict(self._shipped)

    @classmethod
    def from_serialized(cls, blob: dict[str, Any]) -> Tokenizer:
        """Rebuild a tokenizer from :meth:`serialize` output, checking its fingerprint.

        Args:
            blob: What :meth:`serialize` returned.
        Returns:
            The Tokenizer.
        Raises:
            ConfigError: The blob's fingerprint does not match its files.
        """
        from tokenizers import Tokenizer as RustTokenizer

        try:
            backend = RustTokenizer.from_str(blob["tokenizer_json"])
        except Exception as e:
            raise ConfigError(f"serialized tokenizer {blob.get('name')!r} is broken: {e}") from e
        tok = cls(backend, blob["name"], blob["bos_id"], blob["eos_id"], blob["pad_id"])
        if tok.fingerprint != blob["fingerprint"]:
            if tok.backend is not backend:
                raise ConfigError(
                    f"serialized tokenizer {blob['name']!r} was written by a beamtok that kept the tokenizer file's own "
                    "truncation or padding, which cut and padded every document: what it made is not what this beamtok makes; "
                    "rebuild the cache (or start the run anew)"
                )
            raise ConfigError(f"serialized tokenizer {blob['name']!r} does not match its fingerprint")
        return tok

    @property
    def bos_token(self) -> str:
        return str(self.backend.id_to_token(self.bos_id)) if self.bos_id is not None else ""

    @property
    def eos_token(self) -> str:
        return str(self.backend.id_to_token(self.eos_id)) if self.eos_id is not None else ""

    @property
    def chat_template(self) -> str | None:
        return self._chat_template

    def special_tokens_map(self) -> dict[str, str]:
        """The special tokens by name (``bos_token``, ``eos_token``, ...), as ``transformers``
        hands them to a chat template; BOS and EOS alone for a tokenizer rebuilt without it."""
        hf = self.hf
        if hf is not None:
            return {name: value for name, value in hf.special_tokens_map.items() if isinstance(value, str)}
        return {name: value for name, value in (("bos_token", self.bos_token), ("eos_token", self.eos_token)) if value}

    def added_tokens(self) -> list[str]:
        """The text of every added token (special or not)."""
        return [token.content for token in self.backend.get_added_tokens_decoder().values()]

    def adds_bos(self) -> bool:
        """Whether the tokenizer's own post-processor starts every text with its BOS token."""
        ids = self.backend.encode("", add_special_tokens=True).ids
        return self.bos_id is not None and bool(ids) and ids[0] == self.bos_id

    def exact_encoder(self) -> Engine:
        """The exact fast-path encoder of this tokenizer, as :func:`~beamtok._src.engines.engine_choice.choose`
        takes it (ConfigError naming every refused candidate where none can be exact)."""
        choice = self.engine_choice
        if choice.encoder is None:
            raise ConfigError(f"tokenizer {self.name!r} cannot use the exact fast path: {choice.why_not()}")
        return choice.encoder

    def tiktoken(self) -> Engine:
        """Deprecated name of :meth:`exact_encoder` (most engines it returns are not tiktoken)."""
        warnings.warn(
            "Tokenizer.tiktoken() is renamed exact_encoder(); the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.exact_encoder()

    @property
    def engine_choice(self) -> EngineChoice:
        """Which engine encodes this tokenizer and why each faster candidate was refused
        (built once, on first use; :mod:`beamtok._src.engines.engine_choice`)."""
        if self._choice is None:
            with _BUILDING:  # threads asking at once: one builds, the others find its outcome
                if self._choice is None:
                    serialized, self._serialized = self._serialized or self.backend.to_str(), None
                    with gc_paused():  # its checks make ~100,000 short-lived containers: each burst would walk the heap
                        self._choice = choose(self.backend, self.name, serialized)
                    log.debug("tokenizer %r encodes on %s", self.name, self._choice.engine)
        return self._choice

    def fast_path(self) -> Engine | None:
        """Deprecated: ``engine_choice.encoder`` (None where no exact engine takes the file)."""
        warnings.warn(
            "Tokenizer.fast_path() is now engine_choice.encoder (or exact_encoder(), which says why there is none); "
            "the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.engine_choice.encoder

    @property
    def engine(self) -> str:
        """Which engine ``engine="auto"`` uses, and why."""
        choice = self.engine_choice
        fast = choice.encoder
        if fast is not None:
            passed = f"{fast.engine_name} (exact fast path: checks and probe strings passed"
            # an engine kept out by a package the install lacks, or one made for other forms of the
            # family, says nothing about the file
            reasons = [f"{r.candidate}: {r.reason}" for r in choice.refused if not r.expected]
            inner = getattr(fast, "native_refusal", "")  # cached words: why its compiled kernel does not run
            if inner:
                reasons.append(inner)
            if reasons:
                passed += "; faster engines refused: " + "; ".join(reasons)
            return passed + ")"
        return (
            f"tokenizers ({choice.why_not()}). The tokens are the same either way, only slower; where the model also ships "
            "tiktoken ranks, beamtok._src.engines.ranks.tokenizer_json_from_ranks writes a tokenizer.json the fast path takes)"
        )

    def encode_batch(
        self, texts: Sequence[str], add_special_tokens: bool = True, engine: str = "auto", backend: str | None = None
    ) -> list[np.ndarray]:
        """Token ids of each text, as int32 arrays; the same whichever engine encodes.

        Args:
            texts: The texts.
            add_special_tokens: Add the post-processor's tokens.
            engine: ``"auto"`` (the exact engine :attr:`engine_choice` took, else
                ``tokenizers``), ``"exact"`` (that engine, or a ConfigError) or
                ``"tokenizers"`` (Hugging Face ``tokenizers`` itself).
            backend: Deprecated name of ``engine`` (``"tiktoken"`` is ``"exact"``, ``"hf"``
                is ``"tokenizers"``).
        Returns:
            One int32 array of ids a text.
        Raises:
            ConfigError: ``engine="exact"`` and no exact engine takes the file.
        """
        engine = engine_mode(engine, backend)
        if engine == "exact" or (engine == "auto" and self.engine_choice.encoder is not None):
            return self.exact_encoder().encode_batch(texts, add_special_tokens)
        encodings = self.backend.encode_batch_fast(list(texts), add_special_tokens=add_special_tokens)
        return [int32_ids(e.ids) for e in encodings]

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """The text of ``ids``, special tokens included.

        Args:
            ids: Token ids.
        Returns:
            The text.
        """
        return str(self.backend.decode([int(i) for i in ids], skip_special_tokens=False))

    def ref(self) -> TokenizerRef:
        return TokenizerRef(self.name, self.fingerprint, self.bos_id, self.eos_id, self.pad_id)

    def __repr__(self) -> str:
        return f"Tokenizer({self.name!r}, vocab={self.vocab_size}, fingerprint={self.fingerprint})"
