"""Files cut into ranges on the fly: the Beam build's bounds for the same split size, rows a
cache of the same ranges holds (states cross both ways), one file shared by more readers than
files (2, 3 and 4 ranks, DataLoader workers too) and resumed across those world sizes with every
row read once, and what cannot be cut refused in one line before anything starts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beamtok import ConfigError, Dataset
from beamtok._src.cache.build.ranges import plan_ranges
from beamtok._src.core.spec import SourceSpec
from beamtok._src.sources.urls import Shard, split_range

from conftest import cache_without_beam, real_paragraphs, small_vocab_tokenizer, write_jsonl


def packed(ds: Dataset) -> Dataset:
    return ds.tokenize(small_vocab_tokenizer()).ensure_bos_eos().concat_chunk(32)


@pytest.fixture(scope="module")
def one_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("ranges") / "big.jsonl"
    write_jsonl(path, [{"text": p} for p in real_paragraphs(80)])
    return str(path)


def rows(ds: Dataset) -> list[tuple[int, int, list[int]]]:
    return [(int(r["shard"]), int(r["index"]), r["input_ids"].tolist()) for r in ds]


@pytest.mark.parametrize("split_bytes", [2000, 9000, 50_000])
def test_the_ranges_are_the_beam_builds_for_the_same_split_size(one_file, tmp_path, split_bytes):
    table = pa.table({"text": real_paragraphs(60)})
    parquet = tmp_path / "big.parquet"
    pq.write_table(table, parquet, row_group_size=7)
    for url in (one_file, str(parquet)):
        planned = plan_ranges(Shard(0, url), SourceSpec(), split_bytes)
        cut = Dataset.from_files(url, split_bytes=split_bytes).shards
        if len(planned) == 1:
            assert [s.url for s in cut] == [url]
            continue
        assert [split_range(s.url)[1:] for s in cut] == [(p.start, p.stop) for p in planned], url
        assert [s.index for s in cut] == list(range(len(cut)))


def test_a_range_reads_the_documents_whose_first_byte_it_holds(one_file):
    whole = [d["text"] for d in Dataset.from_files(one_file)]
    pieces = Dataset.from_files(one_file, split_bytes=500)
    assert len(pieces.shards) > 10
    assert [d["text"] for d in pieces] == whole  # unpacked: every document once, in order


def test_a_cut_dataset_is_the_cache_built_with_the_same_ranges_and_states_cross(one_file, tmp_path):
    from click.testing import CliRunner

    from beamtok._src.cli.app import main

    ds = packed(Dataset.from_files(one_file, split_bytes="auto"))
    out = tmp_path / "cache"
    result = CliRunner().invoke(
        main,
        [
            "cache",
            one_file,
            "--tokenizer",
            small_vocab_tokenizer(),
            "--seq-len",
            "32",
            "--file-ranges",
            "auto",
            "--output",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    cache = Dataset.from_cache(str(out))
    assert [s.url for s in cache.shards] == [s.url for s in ds.shards]
    assert rows(cache) == rows(ds)
    for a, b in ((ds, cache), (cache, ds)):
        it = a.shard_by_rank(1, 3).iter()
        for _ in range(17):
            next(it)
        state = json.loads(json.dumps(it.state_dict()))
        assert [r["index"] for r in it] == [r["index"] for r in b.shard_by_rank(1, 3).iter(state)]


def test_ranges_are_packed_on_their_own(one_file):
    whole, cut = packed(Dataset.from_files(one_file)), packed(Dataset.from_files(one_file, split_bytes="auto"))
    assert len(cut.shards) > 1
    tokens = sorted(t for r in whole for t in r["input_ids"].tolist())
    assert sorted(t for r in cut for t in r["input_ids"].tolist()) != tokens  # a range's tail is its own row
    per_range = [packed(Dataset.from_files(s.url)) for s in cut.shards]
    assert [r[2] for r in rows(cut)] == [r[2] for ds in per_range for r in rows(ds)]


@pytest.mark.parametrize("world", [2, 3, 4])
def test_one_file_on_more_ranks_than_files_is_cut_and_every_row_is_read_once(one_file, world):
    ds = packed(Dataset.from_files(one_file))
    shares = [rows(ds.shard_by_rank(rank, world)) for rank in range(world)]
    assert all(shares)
    seen = Counter((s, i) for share in shares for s, i, _ in share)
    assert max(seen.values()) == 1
    assert set(seen) == {(s, i) for s, i, _ in rows(ds.cut_files("auto"))}


@pytest.mark.parametrize("worlds", [(2, 3, 4, 1), (4, 2, 3)])
def test_resumed_across_world_sizes_every_row_once(one_file, worlds):
    ds = packed(Dataset.from_files(one_file))
    read: list[tuple[int, int]] = []
    states = None
    for n, world in enumerate(worlds):
        last = n == len(worlds) - 1
        readers = [ds.shard_by_rank(rank, world) for rank in range(world)]
        its = [r.iter() if states is None else r.iter_merged(states) for r in readers]
        for it in its:
            for _ in range(10**9 if last else 9):
                try:
                    r = next(it)
                except StopIteration:
                    break
                read.append((int(r["shard"]), int(r["index"])))
        states = [json.loads(json.dumps(it.state_dict())) for it in its]
    assert Counter(read).most_common(1)[0][1] == 1
    assert set(read) == {(s, i) for s, i, _ in rows(ds.cut_files("auto"))}


def test_dataloader_workers_count_as_readers(one_file):
    torch = pytest.importorskip("torch")
    from torchdata.stateful_dataloader import StatefulDataLoader

    ds = packed(Dataset.from_files(one_file))
    got = []
    for rank in range(2):
        loader = StatefulDataLoader(
            ds.shard_by_rank(rank, 2, loader_workers=2).batch(4).to_torch(), batch_size=None, num_workers=2
        )
        for batch in loader:
            assert isinstance(batch["shard"], torch.Tensor)
            got += list(zip(batch["shard"].tolist(), batch["index"].tolist()))
    assert Counter(got).most_common(1)[0][1] == 1
    assert set(got) == {(s, i) for s, i, _ in rows(ds.cut_files("auto"))}


def test_what_cannot_be_cut_is_refused_in_one_line(one_file, tmp_path):
    gz = write_jsonl(tmp_path / "one.jsonl.gz", [{"text": p} for p in real_paragraphs(5)], compression="gzip")
    with pytest.raises(
        ConfigError,
        match=r"^1 shard\(s\) \(compressed or other files read whole cannot be cut into ranges\) cannot be split over 2 readers \(world_size=2 x workers=1\)",
    ):
        packed(Dataset.from_files(str(gz))).shard_by_rank(0, 2)
    cache = cache_without_beam(packed(Dataset.from_files(one_file)), str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match=r"1 shard\(s\) cannot be split over 6 readers \(world_size=3 x workers=2\)"):
        cache.shard_by_rank(2, 3, loader_workers=2)
    with pytest.raises(
        ConfigError, match=r"shard\(s\) \(1 file\(s\) cut into ranges\) cannot be split over 64 readers"
    ):
        packed(Dataset.from_files(one_file)).shard_by_rank(0, 64)
    assert packed(Dataset.from_files(one_file)).shard_by_rank(0, 64, split="examples")  # every k-th example: always


def test_the_distributed_loader_refuses_before_any_worker_starts(one_file, tmp_path):
    pytest.importorskip("torchdata")
    from beamtok._src.distributed.torch_loader import DistributedLoader

    cache = cache_without_beam(packed(Dataset.from_files(one_file)), str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="cannot be split over 4 readers"):  # split by shards, asked for by name
        DistributedLoader(cache.batch(2), rank=1, world_size=2, num_workers=2, even=None, split="shards")
    with pytest.raises(ConfigError, match=r"needs torch\.distributed initialized"):
        DistributedLoader(cache.batch(2), rank=1, world_size=2)


def test_a_range_url_names_its_bytes_in_errors(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = [json.dumps({"text": p}) for p in real_paragraphs(40)]
    good[30] = '{"text": broken'
    path.write_text("\n".join(good) + "\n")
    ds = Dataset.from_files(str(path), split_bytes=4000)
    with pytest.raises(Exception, match=r"bad\.jsonl#range=\d+-\d*: byte \d+"):
        list(ds)


def test_a_cut_file_keeps_its_cut_on_a_resume_with_fewer_readers_than_files(one_file):
    ds = packed(Dataset.from_files(one_file))
    assert Path(one_file).exists()
    its = [ds.shard_by_rank(rank, 2).iter() for rank in range(2)]
    first = [next(it)["index"] for it in its]
    assert first
    states = [it.state_dict() for it in its]
    assert states[0]["plan"]["root"]["ranges"] == "auto"
    rest = list(ds.iter_merged(states))  # one reader: the files would not be cut, the saved cut is kept
    assert len(rest) + 2 == len(rows(ds.cut_files("auto")))


def test_a_state_refused_for_another_shard_list_names_both_lists(one_file, monkeypatch):
    import os

    from beamtok import StateError

    monkeypatch.chdir(os.path.dirname(one_file))
    relative = os.path.basename(one_file)
    saved = packed(Dataset.from_files(relative, split_bytes="auto")).iter()
    next(saved)
    state = json.loads(json.dumps(saved.state_dict()))
    Path(one_file).with_name("other.jsonl").write_bytes(Path(one_file).read_bytes())
    elsewhere = packed(Dataset.from_files(str(Path(one_file).with_name("other.jsonl")), split_bytes="auto"))
    with pytest.raises(StateError) as refused:
        elsewhere.iter(state)
    message = str(refused.value)
    count = len(elsewhere.shards)
    assert f"shard list: {count} shards, {relative}#range=0-" in message  # the saved list, by its ends
    assert f" → {count} shards, {Path(one_file).with_name('other.jsonl')}#range=0-" in message  # and this one


def test_states_cross_between_spellings_of_the_same_files_and_their_cache(one_file, tmp_path, monkeypatch):
    import os

    from click.testing import CliRunner

    from beamtok._src.cli.app import main

    monkeypatch.chdir(os.path.dirname(one_file))
    relative = os.path.basename(one_file)
    spelled = {
        "relative": packed(Dataset.from_files(relative, split_bytes="auto")),
        "absolute": packed(Dataset.from_files(one_file, split_bytes="auto")),
    }
    out = tmp_path / "cache"
    arguments = ["cache", relative, "--tokenizer", small_vocab_tokenizer(), "--seq-len", "32", "--file-ranges", "auto"]
    result = CliRunner().invoke(main, [*arguments, "--output", str(out), "-q"])
    assert result.exit_code == 0, result.output
    spelled["cache"] = Dataset.from_cache(str(out))
    for a, b in (("relative", "absolute"), ("absolute", "cache"), ("cache", "relative")):
        it = spelled[a].shard_by_rank(1, 3).iter()
        for _ in range(9):
            next(it)
        state = json.loads(json.dumps(it.state_dict()))
        assert [r["index"] for r in it] == [r["index"] for r in spelled[b].shard_by_rank(1, 3).iter(state)], (a, b)
