"""beamtok's data position in an Orbax checkpoint, beside a JAX job's parameters, resumed on any
number of processes.

Each process saves its own iterator state (``it.state_dict()``) as a JSON file named for its
process index and the process count; restoring reads *every* process's file from the
checkpoint and returns them all, in process order, whatever the process count now. Handed that
list, a restart on the same number of processes resumes each from its own state (exactly), and
a restart on another number merges them (beamtok's elastic merge: nothing lost or repeated)::

    import orbax.checkpoint as ocp
    from beamtok.training import BeamtokRestore, BeamtokSave

    ds = dataset.shard_by_rank(jax.process_index(), jax.process_count())
    manager.save(step, args=ocp.args.Composite(params=ocp.args.StandardSave(params), data=BeamtokSave(it.state_dict())))
    restored = manager.restore(step, args=ocp.args.Composite(params=..., data=BeamtokRestore()))
    it = ds.iter_merged(restored["data"])

Here the states are read from the checkpoint, not gathered at save time (as the torch loader
does): an Orbax handler runs on every process and writes where it likes, and JAX jobs run one
process per host, so a restore reads as many small files as there were hosts. A file missing,
two files of one process, or files of two process counts are refused by name.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from beamtok._src.base.errors import StateError
from beamtok._src.base.extras import missing_extra

try:
    import jax
    import orbax.checkpoint as ocp
    from etils import epath
except ImportError as error:
    raise ModuleNotFoundError(
        missing_extra("beamtok._src.distributed.orbax_state", "jax", "orbax") or str(error)
    ) from None

__all__ = ["BeamtokCheckpointHandler", "BeamtokRestore", "BeamtokSave"]

_STATE_FILE = re.compile(r"^process_(\d+)-of-(\d+)\.json$")


class BeamtokCheckpointHandler(ocp.handlers.CheckpointHandler):
    """Saves this process's beamtok state; restores every process's, in process order."""

    def save(self, directory: epath.Path, *args: Any, **kwargs: Any) -> None:
        """Write this process's state as ``process_I-of-N.json``.

        Args:
            directory: The checkpoint item's directory.
            *args: ``BeamtokSave`` (Orbax passes it as ``args``).
            **kwargs: Orbax's.
        """
        save_args: BeamtokSave = kwargs["args"] if "args" in kwargs else args[0]
        index, count = jax.process_index(), jax.process_count()
        path = epath.Path(directory) / f"process_{index}-of-{count}.json"
        path.write_text(json.dumps(save_args.state))

    def restore(self, directory: epath.Path, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """Every old process's state, in process order, whatever the process count now:
        ``iter_merged(...)`` resumes each process from its own where the count is the
        saved one, and merges them where it is not.

        Args:
            directory: The checkpoint item's directory.
            *args: Orbax's (unused).
            **kwargs: Orbax's (unused).
        Returns:
            Every old process's state.
        Raises:
            StateError: A process's file is missing or doubled, or files of two process counts are mixed.
        """
        return _read_states(epath.Path(directory))

    def metadata(self, directory: epath.Path) -> None:
        """No metadata is kept.

        Args:
            directory: The checkpoint item's directory.
        Returns:
            None: the item keeps none.
        """
        return None


def _read_states(directory: epath.Path) -> list[dict[str, Any]]:
    named = [
        (int(m.group(1)), int(m.group(2)), path) for path in directory.iterdir() if (m := _STATE_FILE.match(path.name))
    ]
    if not named:
        raise StateError(f"{directory}: no beamtok state in this checkpoint item (saved without BeamtokSave?)")
    counts = {count for _, count, _ in named}
    if len(counts) > 1:
        raise StateError(f"{directory}: beamtok states of runs with {sorted(counts)} processes mixed in one checkpoint")
    found: dict[int, Any] = {}
    for index, _, path in named:
        if index in found:
            raise StateError(f"{directory}: two beamtok states of process {index} ({found[index].name}, {path.name})")
        found[index] = path
    (count,) = counts
    missing = sorted(set(range(count)) - set(found))
    if missing:
        raise StateError(
            f"{directory}: the beamtok states of processes {missing} of {count} are missing; resuming would lose their data"
        )
    states = []
    for index in range(count):
        try:
            states.append(json.loads(found[index].read_text()))
        except ValueError as error:
            raise StateError(f"{found[index]}: not a beamtok state ({error})") from None
    return states


@ocp.args.register_with_handler(BeamtokCheckpointHandler, for_save=True)
@dataclasses.dataclass
class BeamtokSave(ocp.args.CheckpointArgs):
    """This process's beamtok iterator state (``it.state_dict()``), to save.

    Attributes:
        state: This process's ``it.state_dict()``.
    """

    state: dict[str, Any]


@ocp.args.register_with_handler(BeamtokCheckpointHandler, for_restore=True)
@dataclasses.dataclass
class BeamtokRestore(ocp.args.CheckpointArgs):
    """Restore the beamtok state: every old process's, in process order. It has no fields:
    the handler reads every state file of the checkpoint item."""
