"""mkdocs hook: the pages made from the project's own sources at build time.

- ``<!-- generated: results -->`` becomes one section per ``benchmarks/results/*.json``: the
  run's date, cores, machine and command, then every figure it holds (ratios paired within a
  round first, per-tokenizer figures side by side), so no figure on the site is typed by hand.
- ``<!-- generated: cli -->`` becomes the CLI reference: the one option table of
  ``beamtok cache`` (``beamtok._src.core.cache_options``) and every command's ``--help``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
SKIPPED_KEYS = {
    "runs",
    "rounds",
    "read_rounds",
    "command",
    "corpus",
    "machine",
    "date",
    "cores",
    "note",
    "pinned",
    "source",
}
RATIO_KEYS = ("ratios", "bounds", "peak_ratios", "ratios to sequential")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "<!-- generated: results -->" in markdown:
        markdown = markdown.replace("<!-- generated: results -->", results_markdown())
    if "<!-- generated: cli -->" in markdown:
        markdown = markdown.replace("<!-- generated: cli -->", cli_markdown())
    return markdown


# ------------------------------------------------------------------ benchmark results


def results_markdown() -> str:
    sections = []
    for path in sorted(RESULTS.glob("*.json")):
        data = json.loads(path.read_text())
        sections.append(_result_section(path.name, data))
    return "\n\n".join(sections)


def _result_section(name: str, data: dict[str, Any]) -> str:
    meta = [f"{key}: {data[key]}" for key in ("date", "cores", "machine") if isinstance(data.get(key), (str, int))]
    lines = [f"### `{name}`", ""]
    if meta:
        lines += [" · ".join(meta), ""]
    if isinstance(data.get("command"), str):
        lines += [f"`{data['command'].strip()}`", ""]
    for key in ("corpus", "note", "pinned"):
        if isinstance(data.get(key), str):
            lines += [f"*{key}*: {data[key]}", ""]
    leaves = list(_leaves(data, ()))
    grids, plain = _split_grids(leaves)
    for title, (columns, rows) in grids.items():
        lines += _grid_table(title, columns, rows)
    ratios = [(p, v) for p, v in plain if _is_ratio(p)]
    others = [(p, v) for p, v in plain if not _is_ratio(p)]
    if ratios:
        lines += ["| ratio (paired within a round) | value |", "|---|---|"]
        lines += [f"| {_label(p)} | {_format(p, v)} |" for p, v in ratios]
        lines.append("")
    if others:
        lines += [f'??? note "every other figure of {name} ({len(others)})"', ""]
        lines += ["    | figure | value |", "    |---|---|"]
        lines += [f"    | {_label(p)} | {_format(p, v)} |" for p, v in others]
        lines.append("")
    return "\n".join(lines)


def _leaves(value: Any, path: tuple[str, ...]) -> Any:
    """(path, value) of every number, boolean and short string, lists and runs left out."""
    if isinstance(value, dict):
        for key, item in value.items():
            if str(key) in SKIPPED_KEYS and (not path or str(key) in ("runs", "rounds", "read_rounds")):
                continue
            yield from _leaves(item, (*path, str(key)))
    elif isinstance(value, bool) or isinstance(value, (int, float)):
        yield path, value
    elif isinstance(value, str) and len(value) <= 80 and path:
        yield path, value


def _split_grids(leaves: list[tuple[tuple[str, ...], Any]]) -> tuple[dict[str, Any], list[Any]]:
    """Figures measured per tokenizer (a ``tokenizers`` level in the path) set side by side."""
    grids: dict[str, tuple[list[str], dict[str, dict[str, Any]]]] = {}
    plain = []
    for path, value in leaves:
        if "tokenizers" in path[:-2]:
            at = path.index("tokenizers")
            title = " · ".join(path[:at]) or "per tokenizer"
            column, row = path[at + 1], path[at + 2 :]
            columns, rows = grids.setdefault(title, ([], {}))
            if column not in columns:
                columns.append(column)
            rows.setdefault(" · ".join(row), {})[column] = (path, value)
        else:
            plain.append((path, value))
    return grids, plain


def _grid_table(title: str, columns: list[str], rows: dict[str, dict[str, Any]]) -> list[str]:
    ordered = sorted(
        rows.items(), key=lambda item: (not any(_is_ratio(p) for p, _ in item[1].values()), list(rows).index(item[0]))
    )
    lines = [f"| {title} | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for label, cells in ordered:
        values = [_format(*cells[c]) if c in cells else "" for c in columns]
        lines.append(f"| {label} | " + " | ".join(values) + " |")
    return [*lines, ""]


def _is_ratio(path: tuple[str, ...]) -> bool:
    return any(key in path for key in RATIO_KEYS) or path[-1].startswith("ratio") or path[-1].startswith("vs_")


def _label(path: tuple[str, ...]) -> str:
    return " · ".join(part for part in path if part not in RATIO_KEYS) or path[-1]


def _format(path: tuple[str, ...], value: Any) -> str:
    if isinstance(value, bool) or isinstance(value, str):
        return str(value).replace("|", "\\|")
    if _is_ratio(path) and isinstance(value, float):
        return f"{value:.2f}x"
    if isinstance(value, int):
        return f"{value:,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


# ------------------------------------------------------------------ CLI reference


def cli_markdown() -> str:
    import click

    from beamtok._src.cli import main
    from beamtok._src.core.cache_options import CACHE_OPTIONS

    scopes = {
        "input": "which data",
        "dataset": "how it is read, tokenized and packed",
        "build": "how the cache is written",
        "config": "data configs",
    }
    lines = ["## The option table", ""]
    lines += [
        "One table (`beamtok._src.core.cache_options`) makes `beamtok cache`'s options, the keys of its",
        "`--config` YAML and of data configs, and `Dataset.cache`'s build defaults.",
        "",
        "| option | YAML key | default | values | what it does | scope |",
        "|---|---|---|---|---|---|",
    ]
    for option in CACHE_OPTIONS:
        flag = f"`{option.cli_name}`" if option.command_line else "(YAML only)"
        if option.switch:
            flag = f"`{option.cli_name}` / `--no-{option.cli_name[2:]}`"
        default = "" if option.default in (None, ()) else f"`{option.default}`"
        values = (
            ", ".join(f"`{c}`" for c in option.choices)
            if option.choices
            else (option.type.__name__ if option.type else ("flag" if option.flag or option.switch else "text"))
        )
        text = re.sub(r"\s*\[default: [^\]]*\]", "", option.help).replace("|", "\\|")
        lines.append(
            f"| {flag} | `{option.name}` | {default} | {values} | {text} | {scopes.get(option.scope, option.scope)} |"
        )
    lines.append("")
    context = click.Context(main, info_name="beamtok")
    lines += ["## Commands", "", "```text", main.get_help(context), "```", ""]
    for name in main.list_commands(context):
        command = main.get_command(context, name)
        if command is None or command.hidden:
            continue
        sub = click.Context(command, info_name=name, parent=context)
        lines += [f"### `beamtok {name}`", "", "```text", command.get_help(sub), "```", ""]
    return "\n".join(lines)
