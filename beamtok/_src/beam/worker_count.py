"""A local multi-process build starts no more worker processes than it has pieces of work.

Each worker process costs its start-up (Beam's import and the tokenizer's engine) whether or not it gets work, and a build's pieces are its input files and the
ranges large files are cut into. Where the flags ask for more workers than there can be
pieces, the build asks Beam for as many workers as pieces, and says so. The count of pieces is
an upper bound from the files' sizes (a compressed file is counted as if it were cut, though
it is not); remote and in-memory inputs leave the count as asked.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence

from beamtok._src.beam.worker_server import option_value
from beamtok._src.cache.build.writer import source_size
from beamtok._src.core.cache_options import LOCAL_RUNNERS
from beamtok._src.sources.urls import Shard

log = logging.getLogger(__name__)

__all__ = ["fitted_worker_args", "pieces_at_most"]


def pieces_at_most(shards: Sequence[Shard], split_bytes: int | None) -> int | None:
    """At most how many pieces of work these shards make (None: not known, for a remote or
    in-memory shard)."""
    pieces = 0
    for shard in shards:
        size = source_size(shard)
        if size is None:
            return None
        pieces += 1 if split_bytes is None or size <= split_bytes else math.ceil(size / split_bytes)
    return pieces


def fitted_worker_args(beam_args: Sequence[str], shards: Sequence[Shard], split_bytes: int | None) -> list[str]:
    """``beam_args`` with ``--direct_num_workers`` lowered to the pieces of work where a local
    multi-process build asks for more (logged at warning level); otherwise as given."""
    args = list(beam_args)
    runner = option_value(args, "runner")
    if option_value(args, "direct_running_mode") != "multi_processing" or (
        runner is not None and runner not in LOCAL_RUNNERS
    ):
        return args
    asked = option_value(args, "direct_num_workers")
    if asked is None or not asked.isdigit():
        return args
    workers = int(asked) or (os.cpu_count() or 1)
    pieces = pieces_at_most(shards, split_bytes)
    if pieces is None or workers <= pieces:
        return args
    log.warning(
        "%d worker processes asked for, but the input makes at most %d piece(s) of work (%d file(s)): starting %d; "
        "each worker costs its start-up whether or not it gets work",
        workers,
        pieces,
        len(shards),
        pieces,
    )
    kept = [
        a
        for i, a in enumerate(args)
        if not a.startswith("--direct_num_workers") and not (i > 0 and args[i - 1] == "--direct_num_workers")
    ]
    return [*kept, f"--direct_num_workers={pieces}"]
