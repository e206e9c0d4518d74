"""DistributedLoader in real torchrun jobs (gloo, CPU): saved in one DCP checkpoint with a model
(replicated, or sharded with FSDP2's fully_shard), loaded on another world size and another
number of DataLoader workers, for files split by shards, one file cut into ranges, a cache split by
shards, an example split, balance_ranks, a mix and a global shuffle over a cache, each with
even="pad" (together the ranks read every row once) and even="drop" (no row twice, every rank
stops at the same step). And the checks of the saved value: missing, duplicated, foreign."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from beamtok import Dataset, StateError

from conftest import (
    cache_without_beam,
    real_paragraphs,
    run_torchrun,
    small_vocab_tokenizer,
    write_jsonl,
)

torch = pytest.importorskip("torch")
pytest.importorskip("torchdata")

JOB = str(Path(__file__).resolve().parent / "dcp_job.py")
KINDS = ["shards", "one_file", "cache_shards", "examples", "balance", "mix", "global_shuffle"]


def packed(files: list[str]) -> Dataset:
    return Dataset.from_files(files).tokenize(small_vocab_tokenizer()).ensure_bos_eos().concat_chunk(32)


def torchrun(nproc: int, *args: str) -> None:
    run_torchrun(nproc, JOB, *args)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dcp")
    (root / "data").mkdir()
    paragraphs = real_paragraphs(100)
    for i in range(6):  # shards of uneven sizes
        write_jsonl(root / "data" / f"part-{i}.jsonl", [{"text": p} for p in paragraphs[i * 12 : i * 12 + 6 + 2 * i]])
    for i in range(2):
        write_jsonl(root / "data" / f"other-{i}.jsonl", [{"text": p} for p in paragraphs[80 + i * 10 : 90 + i * 10]])
    write_jsonl(root / "data" / "big.jsonl", [{"text": p} for p in paragraphs[:60]])  # one file for every rank
    cache_without_beam(packed(sorted(str(p) for p in (root / "data").glob("part-*.jsonl"))), str(root / "cache"))
    return root


def read_back(root: Path, kind: str, phase: str, world: int) -> tuple[list[tuple[int, int, int]], int, list[int]]:
    """The rows every rank read (padding rows left out), how many padding rows, and each rank's steps."""
    rows: list[tuple[int, int, int]] = []
    steps = []
    for rank in range(world):
        saved = json.loads((root / f"rows-{kind}-{phase}-{rank}.json").read_text())
        rows += [tuple(r) for r in saved["rows"]]
        steps.append(saved["steps"])
    real = [r for r in rows if r[1] >= 0]  # padding rows (even="pad") carry shard -1
    return real, len(rows) - len(real), steps


def reference(root: Path, kind: str) -> list[tuple[int, int, int]]:
    parts = packed(sorted(str(p) for p in (root / "data").glob("part-*.jsonl")))
    if kind == "mix":
        other = packed(sorted(str(p) for p in (root / "data").glob("other-*.jsonl")))
        ds = Dataset.mix([parts, other], [0.7, 0.3], seed=0, max_epochs=1)
        return [(int(e["source"]), int(e["shard"]), int(e["index"])) for e in ds]
    if kind == "one_file":
        parts = packed([str(root / "data" / "big.jsonl")]).cut_files("auto")
    if kind == "global_shuffle":
        parts = Dataset.from_cache(str(root / "cache")).global_shuffle(seed=3)
    return [(0, int(e["shard"]), int(e["index"])) for e in parts]


@pytest.mark.parametrize(
    ("fsdp", "old", "new", "even"),
    [
        (True, (2, 2), (3, 1), "pad"),
        (False, (3, 1), (2, 0), "pad"),
        (False, (2, 0), (4, 1), "drop"),
    ],
)
def test_saved_in_dcp_and_resumed_on_another_world_size_and_worker_count(root, fsdp, old, new, even):
    """``pad`` up (with FSDP) and down the world sizes, ``drop`` up, with workers added, taken
    away and changed. Nothing about the ending is saved (it is agreed by an all-reduce at every
    step, on whatever world size reads), so ``drop`` on the way down runs what ``pad`` on the
    way down and ``drop`` on the way up run."""
    (old_world, old_workers), (new_world, new_workers) = old, new
    common = ["--root", str(root), "--tokenizer", small_vocab_tokenizer(), "--kinds", *KINDS, "--ending", even] + (
        ["--fsdp"] if fsdp else []
    )
    torchrun(old_world, *common, "--phase", "save", "--workers", str(old_workers), "--steps", "3")
    torchrun(new_world, *common, "--phase", "resume", "--workers", str(new_workers))
    for kind in KINDS:
        (before, _, _), (after, pads, steps) = (
            read_back(root, kind, "save", old_world),
            read_back(root, kind, "resume", new_world),
        )
        assert before and after, kind
        assert len(set(steps)) == 1, f"{kind}: the ranks ended at different steps {steps}"
        seen = Counter(before + after)
        assert max(seen.values()) == 1, f"{kind}: repeated {[r for r, n in seen.items() if n > 1][:5]}"
        want = reference(root, kind)
        assert set(seen) <= set(want), f"{kind}: rows that are not the data's {sorted(set(seen) - set(want))[:5]}"
        if even == "drop":  # every rank stops at the first rank's end: the others' last rows are not read
            assert pads == 0, kind
        elif kind == "balance":  # a last global batch with fewer rows than ranks is dropped: a prefix is read
            assert set(seen) == set(want[: len(seen)]) and len(want) - len(seen) < new_world * 4, kind
        else:
            assert set(seen) == set(want), f"{kind}: lost {sorted(set(want) - set(seen))[:5]}"
        saved, loaded = (
            json.loads((root / f"weights-{kind}-{phase}.json").read_text()) for phase in ("save", "resume")
        )
        assert saved == loaded, f"{kind}: the model's weights did not come back through the same checkpoint"


def test_the_saved_value_names_what_is_wrong():
    from beamtok._src.distributed.rank_states import pack_rank_states, unpack_rank_states

    entries = [{"rank": r, "num_workers": 1, "loader": {"beamtok_state": r}} for r in range(3)]
    packed_states = pack_rank_states(entries)
    assert unpack_rank_states(packed_states).loader_states == [{"beamtok_state": r} for r in range(3)]
    with pytest.raises(StateError, match=r"missing ranks \[1\]"):
        pack_rank_states([entries[0], entries[2]])
    with pytest.raises(StateError, match=r"ranks \[0\] given twice"):
        pack_rank_states([entries[0], entries[0], entries[2]])
    with pytest.raises(StateError, match="no beamtok rank states"):
        unpack_rank_states({"step": 3})
    with pytest.raises(StateError, match="format version 9"):
        unpack_rank_states({**packed_states, "version": 9})
    with pytest.raises(StateError, match="damaged"):
        unpack_rank_states({**packed_states, "states": packed_states["states"][:-4]})


def test_a_checkpoint_without_the_loader_is_refused_not_started_afresh(root, tmp_path):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

    from beamtok._src.distributed.torch_loader import DistributedLoader

    ds = packed(sorted(str(p) for p in (root / "data").glob("part-*.jsonl"))).batch(4)
    dcp.save({"other": {"step": 3}}, checkpoint_id=str(tmp_path / "c"), no_dist=True)
    with pytest.raises(StateError, match="holds no beamtok data state"):
        dcp.load(
            {"data": DistributedLoader(ds)},
            checkpoint_id=str(tmp_path / "c"),
            no_dist=True,
            planner=DefaultLoadPlanner(allow_partial_load=True),
        )


def test_a_state_of_another_pipeline_is_refused_by_name(root, tmp_path):
    import torch.distributed.checkpoint as dcp

    from beamtok._src.distributed.torch_loader import DistributedLoader

    files = sorted(str(p) for p in (root / "data").glob("part-*.jsonl"))
    saving = DistributedLoader(packed(files).batch(4))
    next(iter(saving))
    dcp.save({"data": saving}, checkpoint_id=str(tmp_path / "c"), no_dist=True)
    other = DistributedLoader(
        Dataset.from_files(files).tokenize(small_vocab_tokenizer()).ensure_bos_eos().concat_chunk(48).batch(4)
    )
    dcp.load({"data": other}, checkpoint_id=str(tmp_path / "c"), no_dist=True)
    with pytest.raises(StateError, match=r"concat_chunk|seq_len|pipeline"):
        next(iter(other))
