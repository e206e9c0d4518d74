"""A stream's plan as data, kept in every state: the root's kind and options and each stage's
configuration, whole, under a version number.

Code that needs to know what a state's pipeline was (a resume under another batch size,
``beamtok inspect`` rebuilding the stream, explaining a state without its pipeline) reads the
plan; every state of the current version holds one. The state's ``about`` is made for people
(each part by name, long data as a short hash); only the migration of a state saved before
plans (``beamtok._src.stream.state_migration``) reads it.

Version 2 keeps a mix's sources as runs of equal plans (``[[count, plan], ...]``, read with
:func:`mix_source_plans`): a mix of 1,000 caches packed alike holds one plan, not 1,000, in
every reader's state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from beamtok._src.base.errors import StateError

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


def plan_parts(plan: Mapping[str, Any]) -> dict[str, Any]:
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


def plan_of(state: dict[str, Any]) -> dict[str, Any]:
    """The plan a (current-version) state keeps, checked to be a version-2 plan; StateError
    otherwise. A state of an earlier version goes through
    :func:`beamtok._src.stream.state_migration.migrate` first."""
    plan = state.get("plan")
    if (
        not isinstance(plan, dict)
        or plan.get("version") != PLAN_VERSION
        or not isinstance(plan.get("stages"), list)
        or not isinstance(plan.get("root"), dict)
    ):
        raise StateError(f"the state's plan is not a version-{PLAN_VERSION} plan: {str(plan)[:200]}")
    return plan


def stage_configs(plan: Mapping[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """Each stage of a plan as ``(name, options)``."""
    if plan is None:
        return []
    out = []
    for stage in plan["stages"]:
        if not isinstance(stage, dict) or not isinstance(stage.get("stage"), str):
            raise StateError(f"the state's plan holds a stage that is not one: {stage!r}")
        out.append((stage["stage"], {k: v for k, v in stage.items() if k != "stage"}))
    return out
