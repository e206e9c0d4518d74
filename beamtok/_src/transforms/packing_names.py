"""The packing modes by the names people use: ``beamtok cache --pack`` and data configs take the
API's (``concat_chunk``, ``pack_documents``...), and the names the command line took before
(``concat``, ``window``, ``greedy``...) stay as aliases; and a spec's packing in words."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.transforms.packing_modes import PACKING_MODES, FirstFit, Greedy, PackingMode

__all__ = ["command_line_names", "mode_named", "packing_words"]

Spell = Callable[[str], str]  # an option's name as the user wrote it (--seq-len, seq_len)

# the names `--pack` takes: the API's, then the old command-line names; first_fit is pack_examples
# with --pack-method first_fit under its API name
_BY_COMMAND_LINE_NAME: dict[str, type[PackingMode]] = {
    **{mode.API: mode for mode in PACKING_MODES.values() if mode is not FirstFit},
    **{alias: mode for mode in PACKING_MODES.values() for alias in mode.ALIASES},
}


def command_line_names() -> tuple[str, ...]:
    """Every name ``--pack`` accepts, API names first."""
    return tuple(_BY_COMMAND_LINE_NAME)


def mode_named(name: str, method: str | None, spell: Spell) -> type[PackingMode]:
    """The mode an option table's ``pack`` (and ``pack_method``) ask for."""
    if name not in _BY_COMMAND_LINE_NAME:
        api = [n for n in _BY_COMMAND_LINE_NAME if n in {m.API for m in PACKING_MODES.values()}]
        raise ConfigError(
            f"{spell('pack')} must be one of {', '.join(api)} (or the older {', '.join(n for n in _BY_COMMAND_LINE_NAME if n not in api)}), got {name!r}"
        )
    mode = _BY_COMMAND_LINE_NAME[name]
    if method is not None:
        if mode.API != "pack_examples":
            raise ConfigError(f"{spell('pack_method')} applies to {spell('pack')} pack_examples only")
        mode = FirstFit if method == "first_fit" else Greedy
    return mode


def packing_words(pack: Mapping[str, Any]) -> str:
    """A packing spec's JSON form in words (a mode this version does not know: its name); the
    form named by its Dataset method (``stage``, and ``method`` for pack_examples) too."""
    if "stage" in pack and "mode" not in pack:
        stage = str(pack["stage"])
        mode = (
            PACKING_MODES.get(str(pack.get("method")))
            if stage == "pack_examples"
            else next((m for m in PACKING_MODES.values() if m.API == stage), None)
        )
        return mode.words(pack) if mode is not None else stage
    mode = PACKING_MODES.get(str(pack.get("mode")))
    return mode.words(pack) if mode is not None else str(pack.get("mode"))
