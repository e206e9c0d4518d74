"""Ranks at the end of the data and after a world-size change (real torchrun jobs on gloo):
3 ranks read different amounts and save; 2 ranks resume with ``even`` "pad", "drop" and None
at 0 and 2 DataLoader workers. Under "pad" each rank gets exactly the padding batches that
make its share as long as the longest (the longest share minus its own, no more); "pad" and
None train every row once over both jobs; "drop" stops every rank together; and each loader's
state at the end resumes to nothing on every rank."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from beamtok import Dataset

from conftest import TOKENIZER_DIR, paragraph_files, run_torchrun

pytest.importorskip("torch")
pytest.importorskip("torchdata")

JOB = str(Path(__file__).parent / "end_job.py")


def test_ranks_end_together_pad_exactly_and_resume_to_nothing_after_a_world_size_change(tmp_path):
    (tmp_path / "data").mkdir()
    files = paragraph_files(tmp_path / "data", files=6, per_file=20)
    run_torchrun(3, JOB, "part", str(tmp_path), files, str(TOKENIZER_DIR))
    run_torchrun(2, JOB, "finish", str(tmp_path), files, str(TOKENIZER_DIR))
    first = [tuple(r) for rank in range(3) for r in json.loads((tmp_path / f"part-{rank}.json").read_text())]
    everything = Counter(
        (int(s), int(i))
        for batch in Dataset.from_files(files)
        .tokenize(str(TOKENIZER_DIR))
        .ensure_bos_eos()
        .concat_chunk(64)
        .batch(4)
        .iter()
        for s, i in zip(batch["shard"].tolist(), batch["index"].tolist())
    )
    reports = [json.loads((tmp_path / f"finish-{rank}.json").read_text()) for rank in range(2)]
    for layout in reports[0]:
        ranks = [report[layout] for report in reports]
        reals = [r["real"] for r in ranks]
        if layout.startswith("pad"):
            assert [r["pad"] for r in ranks] == [max(reals) - real for real in reals], layout
            assert max(reals) > min(reals), "the shares differ, so some rank must have padded"
        else:
            assert [r["pad"] for r in ranks] == [0, 0], layout
        assert [r["after_end"] for r in ranks] == [0, 0], layout
        if layout.startswith("drop"):
            assert reals[0] == reals[1], layout
        else:
            trained = Counter(first) + Counter(tuple(row) for r in ranks for row in r["rows"])
            assert trained == everything, layout
