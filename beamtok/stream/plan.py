"""A stream's plan as data, kept in every state: the root's kind and options and each stage's
configuration, whole, under a version number.

Code that needs to know what a state's pipeline was (a resume under another batch size,
``beamtok inspect`` rebuilding the stream, explaining a state without its pipeline) reads the
plan. The state's ``about`` is made for people (each part by name, long data as a short hash)
and is read by code only to turn a state of an earlier version, which has no plan, into one
(:func:`plan_of`).

Version 2 keeps a mix's sources as runs of equal plans (``[[count, plan], ...]``, read with
:func:`mix_source_plans`): a mix of 1,000 caches packed alike holds one plan, not 1,000, in
every reader's state. Version-1 plans still load (their list of plans becomes runs).
"""

from __future__ import annotations

from typing import Any

from beamtok.base.errors import StateError

__all__ = [
    "OPTION_NAMES",
    "PLAN_VERSION",
    "mix_source_plans",
    "option_parts",
    "plan_of",
    "plan_parts",
    "source_runs",
    "stage_configs",
]

PLAN_VERSION = 2

# how a root's options read in a refused resume's message
OPTION_NAMES = {"shuffle_seed": "shuffle_shards seed", "interleave": "open shards (interleave)", "split": "rank split"}


def option_parts(options: dict[str, Any]) -> dict[str, Any]:
    """A root's options JSON as named parts (the world size is checked on its own)."""
    return {OPTION_NAMES.get(key, key): value for key, value in options.items() if key != "world_size"}


def plan_parts(plan: dict[str, Any]) -> dict[str, Any]:
    """A plan's parts by the names a refused resume uses: the root's options, ``even``, each
    stage (``stage 2 (batch)``), in that order."""
    out = option_parts(plan["root"]["options"])
    if plan.get("even") is not None:
        out["even"] = plan["even"]
    for i, (name, config) in enumerate(stage_configs(plan)):
        out[f"stage {i + 1} ({name})"] = config
    root = plan["root"]
    if "mix" in root:
        out["mix"] = root["mix"]
    if "packing" in root:
        out["packing"] = root["packing"]
    for i, source in enumerate(mix_source_plans(root)):
        out[f"mix source {i} options"] = source.get("options")
        out[f"mix source {i} packing"] = source.get("packing")
    return out


def source_runs(plans: list[dict[str, Any]]) -> list[list[Any]]:
    """A mix's source plans as runs of equal consecutive plans: ``[[count, plan], ...]``."""
    runs: list[list[Any]] = []
    for plan in plans:
        if runs and runs[-1][1] == plan:
            runs[-1][0] += 1
        else:
            runs.append([1, plan])
    return runs


def mix_source_plans(root: dict[str, Any]) -> list[dict[str, Any]]:
    """Each mixed source's plan, one per source, from a plan's root (none when not a mix)."""
    runs = root.get("sources")
    if not isinstance(runs, list):
        return []
    out: list[dict[str, Any]] = []
    for run in runs:
        if not (isinstance(run, list) and len(run) == 2 and isinstance(run[0], int) and isinstance(run[1], dict)):
            raise StateError(f"the state's plan holds a mix source run that is not [count, plan]: {str(run)[:200]}")
        out.extend([run[1]] * run[0])
    return out


def plan_of(state: dict[str, Any]) -> dict[str, Any] | None:
    """The plan a state keeps, or the one its ``about`` describes when it was saved before
    states kept plans; None when neither is readable."""
    plan = state.get("plan")
    if plan is not None:
        if (
            not isinstance(plan, dict)
            or plan.get("version") not in (1, PLAN_VERSION)
            or not isinstance(plan.get("stages"), list)
            or not isinstance(plan.get("root"), dict)
        ):
            raise StateError(f"the state's plan is not a version-{PLAN_VERSION} plan: {str(plan)[:200]}")
        if plan["version"] == 1:  # a mix's sources were a list of plans
            root = plan["root"]
            if isinstance(root.get("sources"), list):
                root = {**root, "sources": source_runs(root["sources"])}
            plan = {**plan, "version": PLAN_VERSION, "root": root}
        return plan
    about = state.get("about")
    return _plan_from_about(about) if isinstance(about, dict) else None


def stage_configs(plan: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """Each stage of a plan as ``(name, options)``."""
    if plan is None:
        return []
    out = []
    for stage in plan["stages"]:
        if not isinstance(stage, dict) or not isinstance(stage.get("stage"), str):
            raise StateError(f"the state's plan holds a stage that is not one: {stage!r}")
        out.append((stage["stage"], {k: v for k, v in stage.items() if k != "stage"}))
    return out


# -- states saved before plans: their about names each part; values short enough were kept whole

_ROOT_OPTION_LABELS = {label: key for key, label in OPTION_NAMES.items()}


def _plan_from_about(about: dict[str, Any]) -> dict[str, Any]:
    def kept(name: str) -> Any:
        value = about.get(name)
        return value[0] if isinstance(value, list) and len(value) == 1 else None

    if "global_shuffle" in about:
        kind = "global shuffle"
    elif "mix" in about:
        kind = "mix"
    else:
        kind = "shard source"
    options = {
        _ROOT_OPTION_LABELS.get(label, label): kept(label)
        for label in ("epochs", "shuffle_shards seed", "open shards (interleave)", "rank split", "global_shuffle")
        if label in about
    }
    stages: list[tuple[int, dict[str, Any]]] = []
    for label, value in about.items():
        if label.startswith("stage ") and label.endswith(")") and " (" in label:
            number, name = label[len("stage ") : -1].split(" (", 1)
            if number.isdigit():
                config = (
                    value[0] if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict) else None
                )
                stages.append(
                    (int(number), {"stage": name, **(config or {}), **({} if config is not None else {"unkept": True})})
                )
    packing = {label: kept(label) for label in about if label == "packing" or label.endswith(" packing")}
    root: dict[str, Any] = {"kind": kind, "options": options, "packing": packing.get("packing")}
    if kind == "mix":
        root["sources"] = source_runs(
            [
                {"kind": "shard source", "packing": packing.get(f"mix source {i} packing")}
                for i in range(sum(1 for label in packing if label.startswith("mix source ")))
            ]
        )
    return {
        "version": PLAN_VERSION,
        "root": root,
        "even": kept("even"),
        "stages": [config for _, config in sorted(stages, key=lambda pair: pair[0])],
        "from_about": True,
    }
