"""DistributedLoader on a device mesh (torchrun, gloo, CPU): data split over the data-parallel
dimension only, the tensor-parallel ranks of each data-parallel rank given the same batches,
and the one DCP checkpoint (with a column-sharded layer) resumed on another data-parallel size
with the same tensor-parallel size, every row once."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from beamtok import Dataset

from conftest import real_paragraphs, run_torchrun, small_vocab_tokenizer, write_jsonl

pytest.importorskip("torch")
pytest.importorskip("torchdata")

JOB = str(Path(__file__).resolve().parent / "mesh_job.py")


def torchrun(nproc: int, *args: str) -> None:
    run_torchrun(nproc, JOB, *args)


def read(root: Path, phase: str, world: int) -> list[dict]:
    return [json.loads((root / f"rows-{phase}-{rank}.json").read_text()) for rank in range(world)]


@pytest.mark.parametrize("new_world", [6])
def test_tensor_parallel_peers_read_alike_and_the_data_parallel_size_changes(tmp_path, new_world):
    """4 ranks (2 data-parallel x 2 tensor-parallel) saved, 6 (3 x 2) resumed: three
    data-parallel groups of peers. A data-parallel size that shrinks runs through the same
    gathered state (``test_dcp_checkpoint.py`` resumes 3 ranks on 2)."""
    (tmp_path / "data").mkdir()
    paragraphs = real_paragraphs(90)
    for i in range(6):
        write_jsonl(
            tmp_path / "data" / f"part-{i}.jsonl", [{"text": p} for p in paragraphs[i * 15 : i * 15 + 5 + 2 * i]]
        )
    common = ["--root", str(tmp_path), "--tokenizer", small_vocab_tokenizer()]
    torchrun(4, *common, "--phase", "save")
    torchrun(new_world, *common, "--phase", "resume")
    seen: Counter = Counter()
    for phase, world in (("save", 4), ("resume", new_world)):
        ranks = read(tmp_path, phase, world)
        by_dp: dict[int, list] = {}
        for r in ranks:
            by_dp.setdefault(r["dp"], []).append(r["rows"])
        for dp, peers in by_dp.items():
            assert all(p == peers[0] for p in peers), (
                f"{phase}: tensor-parallel peers of data-parallel rank {dp} read different batches"
            )
            seen.update(tuple(row) for batch in peers[0] for row in batch if row[0] >= 0)
        assert len(by_dp) == world // 2
        assert len({r["weight"] for r in ranks}) == 1  # the sharded layer came back whole on every rank
    want = {
        (int(e["shard"]), int(e["index"]))
        for e in Dataset.from_files(sorted(str(p) for p in (tmp_path / "data").glob("part-*.jsonl")))
        .tokenize(small_vocab_tokenizer())
        .ensure_bos_eos()
        .concat_chunk(32)
    }
    assert max(seen.values()) == 1, [r for r, n in seen.items() if n > 1][:5]
    assert set(seen) == want
    saved, resumed = (read(tmp_path, phase, 1)[0]["weight"] for phase in ("save", "resume"))
    assert saved == resumed
