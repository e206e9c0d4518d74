"""Beam pipeline options, checked by Beam's own parser before a build starts.

Beam itself only warns about an option it cannot parse and then drops it, so a mistyped
``--direct_num_workers`` or a mistyped beamtok option that reaches Beam would run a different
build than the one asked for. Here every ``--name[=value]`` that is not beamtok's own is
looked up among the options of every Beam options class (the same set Beam's parser builds),
its value is parsed with Beam's types and choices, and anything unknown is refused by name
with the closest known option.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from beamtok._src.base.errors import ConfigError

__all__ = ["DASK_RUNNER", "beam_option_names", "check_beam_args", "runner_name", "split_command_line"]


def _parser(tokens: Sequence[str] = ()) -> argparse.ArgumentParser:
    """A parser holding every option of every loaded Beam options class (the Dask runner's
    too where ``tokens`` name Dask: importing it costs over half a second)."""
    from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

    if any("dask" in token.lower() for token in tokens):
        _load_runner_options()

    class Parser(_BeamArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise ConfigError(f"Beam option: {message}")

    parser = Parser(allow_abbrev=False, add_help=False)
    seen: dict[str, type] = {}
    for cls in PipelineOptions.__subclasses__():
        seen.setdefault(str(cls), cls)  # Beam does the same: a class seen twice is added once
    for cls in seen.values():
        cls._add_argparse_args(parser)
    return parser


DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


def _load_runner_options() -> None:
    """Register the options of runners Beam defines only when their module is imported
    (``--dask_client_address`` of the Dask runner, where dask is installed)."""
    try:
        import apache_beam.runners.dask.dask_runner  # noqa: F401
    except ImportError:
        pass


def runner_name(args: Sequence[str]) -> list[str]:
    """``args`` with ``--runner=DaskRunner`` written as the qualified name Beam registers the
    Dask runner under (it knows no short name for it), and, on Dask, one element a partition
    unless the user sized them (``--dask_partition_size=1``): the runner puts 128 elements in a
    partition by default, and a build's elements are whole files or ranges, so a build of
    fewer than 128 would run on one worker."""
    out = []
    dask = False
    for i, arg in enumerate(args):
        if arg in ("--runner=DaskRunner", "--runner=daskrunner"):
            arg = f"--runner={DASK_RUNNER}"
        elif arg == "DaskRunner" and i and args[i - 1] == "--runner":
            arg = DASK_RUNNER
        dask = dask or arg in (f"--runner={DASK_RUNNER}", DASK_RUNNER)
        out.append(arg)
    sized = any(arg.split("=", 1)[0] in ("--dask_npartitions", "--dask_partition_size") for arg in out)
    if dask and not sized:
        out.append("--dask_partition_size=1")
    return out


def beam_option_names() -> list[str]:
    """Every ``--option`` Beam's parser knows."""
    return [name for action in _parser()._actions for name in action.option_strings]


def _unknown(name: str, known: Iterable[str], where: str) -> ConfigError:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]}?" if close else ""
    return ConfigError(f"{where}no such option: {name} (neither a beamtok option nor a Beam pipeline option){hint}")


def split_command_line(
    tokens: Sequence[str], own_options: Iterable[str], where: str = ""
) -> tuple[list[str], list[str]]:
    """Split what the command line left over into positional arguments and Beam options.

    A Beam option that takes a value may have it after ``=`` or as the next token, as Beam
    accepts both. A token starting with ``-`` that Beam does not know is refused, with the
    closest of ``own_options`` and Beam's options as a suggestion.
    """
    parser = _parser(tokens)
    actions = parser._option_string_actions
    known = [*own_options, *actions]
    positional: list[str] = []
    beam: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token == "-" or not token.startswith("-"):
            positional.append(token)
            continue
        name = token.split("=", 1)[0]
        action = actions.get(name)
        if action is None:
            raise _unknown(name, known, where)
        beam.append(token)
        if "=" not in token and action.nargs != 0:
            missing = i >= len(tokens) or tokens[i].startswith("--")
            if missing and action.nargs == "?":
                continue
            if missing:
                raise ConfigError(f"{where}Beam option {name} needs a value ({name}=VALUE)")
            beam.append(tokens[i])
            i += 1
    _parse(parser, beam)
    return positional, beam


def check_beam_args(args: Sequence[str], where: str = "") -> list[str]:
    """``args`` (``--name=value`` strings), each known to Beam and with a valid value."""
    positional, beam = split_command_line(list(args), (), where)
    if positional:
        raise ConfigError(f"{where}Beam options must look like --name=value, got {positional[0]!r}")
    return beam


def _parse(parser: argparse.ArgumentParser, args: list[str]) -> Any:
    try:
        return parser.parse_args(args)
    except ConfigError:
        raise
    except SystemExit as e:  # argparse may still exit on some errors
        raise ConfigError(f"Beam options not accepted: {' '.join(args)}") from e
