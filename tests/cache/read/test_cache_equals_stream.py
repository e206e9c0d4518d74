"""The offline cache: built by a real Beam runner, read back as the very same stream.

Equivalence of cache and on-the-fly streams for every runner and packing, cursors that cross
modes at random points, incremental and killed re-runs, refused mismatches, verify, interop.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beamtok import CacheError, ConfigError, Dataset
from beamtok._src.cache.read.verify import verify_cache
from beamtok.testing import assert_items_equal, check_equivalent, check_resumption

from conftest import CORPUS, ROOT, portable_job_service, real_paragraphs, write_jsonl

pytest.importorskip("apache_beam")
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[str]:
    """Five shards of real text: three small plain JSONL, one shipped gzip, one shipped zstd."""
    root = tmp_path_factory.mktemp("corpus")
    paras = real_paragraphs(90)
    paths = [
        str(write_jsonl(root / f"part-{i}.jsonl", [{"text": t} for t in paras[i * 30 : (i + 1) * 30]]))
        for i in range(3)
    ]
    return [*paths, str(CORPUS / "shakespeare-05.jsonl.gz"), str(CORPUS / "pydocs-00.jsonl.zst")]


def online(corpus, pack="concat", seq_len=256):
    ds = Dataset.from_files(corpus).tokenize(TOKENIZER).ensure_bos_eos()
    if pack == "concat":
        return ds.concat_chunk(seq_len)
    if pack == "pad":
        return ds.pad(seq_len)
    return ds


def stream(ds):
    return ds.shuffle_shards(seed=4).interleave(2).shuffle(window=16, seed=1).batch(4)


@pytest.fixture(scope="module")
def built(corpus, tmp_path_factory):
    """One cache per packing mode, built in-process."""
    root = tmp_path_factory.mktemp("caches")
    return {pack: online(corpus, pack).cache(str(root / pack)) for pack in ("concat", "pad", "none")}


@pytest.mark.parametrize("pack", ["concat", "pad", "none"])
def test_cache_stream_equals_on_the_fly(corpus, built, pack):
    want = list(stream(online(corpus, pack)))
    got = list(stream(built[pack]))
    assert len(want) > 10
    assert_items_equal(got, want)


def test_cached_dataset_keeps_the_stream_stages(corpus, tmp_path):
    ds = stream(online(corpus[:2], seq_len=128))
    cached = ds.cache(str(tmp_path / "c"))
    assert_items_equal(list(cached), list(ds))
    assert cached.stream_fingerprint == ds.stream_fingerprint and cached.spec_fingerprint == ds.spec_fingerprint


def test_multi_processing_build_is_identical(corpus, built, tmp_path):
    cached = online(corpus).cache(str(tmp_path / "mp"), direct_running_mode="multi_processing", direct_num_workers=2)
    assert_items_equal(list(stream(cached)), list(stream(built["concat"])))
    shas = lambda d: [s.sha256 for s in Dataset.from_cache(d).pipeline.root.origin.cache.manifest.shards]  # noqa: E731
    assert shas(str(tmp_path / "mp")) == shas(built["concat"].pipeline.root.origin.cache.directory)


def test_portable_job_service_build_is_identical(corpus, built, tmp_path):
    with portable_job_service() as endpoint:
        cached = online(corpus).cache(
            str(tmp_path / "portable"), runner="PortableRunner", job_endpoint=endpoint, environment_type="LOOPBACK"
        )
    assert_items_equal(list(stream(cached)), list(stream(built["concat"])))


@pytest.mark.parametrize("pack", ["concat", "none"])
def test_cursor_crosses_modes_in_both_directions(corpus, built, pack):
    make_online = lambda: stream(online(corpus, pack))  # noqa: E731
    make_cached = lambda: stream(built[pack])  # noqa: E731
    check_resumption(make_online, random_steps=10, seed=1, resume_dataset=make_cached)
    check_resumption(make_cached, random_steps=10, seed=2, resume_dataset=make_online)


def test_unpacked_cache_packs_at_read_time_like_on_the_fly(corpus, built):
    check_equivalent(
        lambda: stream(online(corpus, "none").concat_chunk(200)), lambda: stream(built["none"].concat_chunk(200))
    )


def test_stats_match_between_modes(corpus, built):
    a, b = online(corpus).iter(), built["concat"].iter()
    list(a), list(b)
    assert a.stats() == b.stats()
    totals = built["concat"].pipeline.root.origin.cache.manifest.totals
    assert totals["documents"]["read"] == a.stats()["documents"]["read"] and totals["rows"] == a.stats()["examples"]


def test_start_example_is_a_seek(built):
    full = list(built["concat"].iter())
    for n in (0, 1, 57, len(full) - 1, len(full)):
        assert_items_equal(list(built["concat"].iter_at(example=n)), full[n:])
    with pytest.raises(ConfigError, match="needs the row counts of a packed cache"):
        Dataset.from_sequence(["a"]).iter_at(example=1)


def sha_and_mtime(directory: Path) -> dict[str, tuple[int, int]]:
    files = [*(directory / "shards").glob("shard-*"), *(directory / "records").glob("shard-*")]
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(files)}


def test_rerun_rebuilds_only_deleted_shards(corpus, tmp_path):
    out = tmp_path / "c"
    online(corpus).cache(str(out))
    before = sha_and_mtime(out)
    manifest = json.loads((out / "manifest.json").read_text())
    for name in ("shards/shard-00001.parquet", "records/shard-00003.json"):
        (out / name).unlink()
    online(corpus).cache(str(out))
    after = sha_and_mtime(out)
    redone = {n for n in after if after[n] != before[n]}
    assert redone == {"shard-00001.parquet", "shard-00001.json", "shard-00003.parquet", "shard-00003.json"}
    rebuilt = json.loads((out / "manifest.json").read_text())
    assert [s["sha256"] for s in rebuilt["shards"]] == [s["sha256"] for s in manifest["shards"]]


def test_killed_build_resumes_to_a_clean_cache(tmp_path, corpus):
    # 40 shards, the build killed once 3 are written: enough left that a loaded machine, whose
    # polling loop may sleep while the build runs on, never finishes them all before the kill
    paras = real_paragraphs(2000)
    inputs = [
        str(write_jsonl(tmp_path / f"in-{i:02d}.jsonl", [{"text": t} for t in paras[i * 50 : (i + 1) * 50]]))
        for i in range(40)
    ]
    args = [
        sys.executable,
        "-m",
        "beamtok._src.cli",
        "cache",
        *inputs,
        "--tokenizer",
        TOKENIZER,
        "--seq-len",
        "64",
        "--quiet",
    ]
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [*args, "--output", str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT
    )
    seen_final: set[str] = set()
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        for path in (killed / "shards").glob("shard-*.parquet"):
            pq.read_metadata(path)  # a file under its final name is always complete
            seen_final.add(path.name)
        if len(list((killed / "records").glob("shard-*.json"))) >= 3:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "manifest.json").exists()
    with pytest.raises(CacheError, match="unfinished"):
        Dataset.from_cache(str(killed))
    done_before = sha_and_mtime(killed)
    finished = {n for n in done_before if n.endswith(".json")}
    assert 3 <= len(finished) < 40
    subprocess.run([*args, "--output", str(killed)], check=True, cwd=ROOT, capture_output=True)
    after = sha_and_mtime(killed)
    for name in finished:  # finished shards were not redone
        parquet = name.replace(".json", ".parquet")
        assert after[name] == done_before[name] and after[parquet] == done_before[parquet]
    clean = tmp_path / "clean"
    subprocess.run([*args, "--output", str(clean)], check=True, cwd=ROOT, capture_output=True)
    for name in after:
        if name.endswith(".parquet"):
            assert (killed / "shards" / name).read_bytes() == (clean / "shards" / name).read_bytes()
    assert not list((killed / "shards").glob("*.tmp-*"))


def test_other_spec_is_refused_unless_overwrite(corpus, tmp_path):
    out = str(tmp_path / "c")
    online(corpus[:2], seq_len=128).cache(out)
    with pytest.raises(CacheError, match="pass --overwrite"):
        online(corpus[:2], seq_len=64).cache(out)
    with pytest.raises(CacheError, match="not the requested"):
        Dataset.from_cache(out, fingerprint=online(corpus[:2], seq_len=64).spec_fingerprint)
    again = online(corpus[:2], seq_len=64).cache(out, overwrite=True)
    assert_items_equal(list(again), list(online(corpus[:2], seq_len=64)))


def test_other_input_files_are_refused_and_overwrite_leaves_nothing_old(corpus, tmp_path):
    out = tmp_path / "c"
    online(corpus[:4], seq_len=128).cache(str(out))
    with pytest.raises(CacheError, match=r"other input files \(4 input files then, 2 now\); pass --overwrite"):
        online(corpus[:2], seq_len=128).cache(str(out))
    with pytest.raises(CacheError, match=r"other input files \(shard 1 was"):
        online([corpus[0], corpus[2], corpus[1], corpus[3]], seq_len=128).cache(str(out))
    assert len(list((out / "shards").glob("*.parquet"))) == 4 and (out / "manifest.json").exists()  # refused: untouched
    again = online(corpus[:2], seq_len=128).cache(str(out), overwrite=True)
    assert sorted(p.name for p in (out / "shards").iterdir()) == [
        f"shard-0000{i}.parquet" for i in range(2)
    ]  # Parquet alone
    assert sorted(p.name for p in (out / "records").iterdir()) == [f"shard-0000{i}.json" for i in range(2)]
    # the folder itself is what a reader is pointed at (docs/parquet-readers.md)
    assert (
        pq.ParquetDataset(str(out / "shards")).read().num_rows
        == again.pipeline.root.origin.cache.manifest.totals["rows"]
    )
    assert_items_equal(list(again), list(online(corpus[:2], seq_len=128)))


def test_a_killed_build_of_other_inputs_is_refused_too(corpus, tmp_path):
    out = tmp_path / "c"
    online(corpus[:3], seq_len=128).cache(str(out))
    (out / "manifest.json").unlink()  # as a killed build leaves it: shard files, no manifest
    with pytest.raises(CacheError, match="other input files"):
        online(corpus[1:3], seq_len=128).cache(str(out))
    assert_items_equal(list(online(corpus[:3], seq_len=128).cache(str(out))), list(online(corpus[:3], seq_len=128)))


def test_state_of_another_spec_is_refused_across_modes(corpus, built):
    it = online(corpus, seq_len=128).iter()
    next(it)
    from beamtok import StateError

    with pytest.raises(StateError, match="spec fingerprint"):
        built["concat"].iter(it.state_dict())


def rewrite_row(path: Path, row: int, token: int) -> None:
    table = pq.read_table(path)
    ids = table.column("input_ids").to_pylist()
    ids[row][3] = token
    table = table.set_column(0, "input_ids", pa.array(ids, type=pa.list_(pa.int32())))
    pq.write_table(table, path, compression="zstd")


def test_verify_passes_then_catches_altered_rows(corpus, tmp_path):
    out = tmp_path / "c"
    online(corpus[:3]).cache(str(out))
    report = verify_cache(str(out), sample=3)
    assert report.ok and report.shards_compared == [0, 1, 2] and report.rows_compared > 10
    first = out / "shards" / "shard-00000.parquet"
    original = first.read_bytes()
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0x01
    first.write_bytes(bytes(flipped))
    assert verify_cache(str(out), sample=0).problems == [
        f"shard 0 ({first}): checksum mismatch (the file was altered after it was written)"
    ]
    first.write_bytes(original)
    shard = out / "shards" / "shard-00001.parquet"
    rewrite_row(shard, 2, 11)
    report = verify_cache(str(out), sample=3)
    assert (
        len(report.problems) == 1
        and report.problems[0].startswith("shard 1 (")
        and "the manifest says" in report.problems[0]
    )
    # a stale cache whose manifest was made to agree with the altered file: the re-run catches it
    manifest = json.loads((out / "manifest.json").read_text())
    import hashlib

    from beamtok._src.cache.format.storage import Storage

    footer = Storage(str(out)).parquet_footer_sha256("shards/shard-00001.parquet")
    manifest["shards"][1].update(
        bytes=shard.stat().st_size, sha256=hashlib.sha256(shard.read_bytes()).hexdigest(), footer_sha256=footer
    )
    (out / "manifest.json").write_text(json.dumps(manifest))
    report = verify_cache(str(out), sample=3)
    assert report.problems == ["shard 1 row 2 field 'input_ids' differs from the on-the-fly result"]
    proc = subprocess.run(
        [sys.executable, "-m", "beamtok._src.cli", "verify", str(out), "--shards", "3"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 1 and "shard 1 row 2 field 'input_ids'" in proc.stderr


def test_cache_files_load_in_other_tools(built):
    directory = Path(built["concat"].pipeline.root.origin.cache.directory)
    files = sorted(str(p) for p in (directory / "shards").glob("*.parquet"))
    table = pq.read_table(files)
    tokens = pa.list_(pa.field("element", pa.int32(), nullable=False))
    assert table.schema.field("input_ids").type == tokens and table.schema.field("segment_ids").type == tokens
    examples = list(built["concat"])
    rows = len(examples)
    assert table.num_rows == rows
    assert table.column("loss_mask").null_count == rows  # pretraining rows: the mask is the real tokens
    assert table.column("input_ids").to_pylist()[-1] == examples[-1]["input_ids"].tolist()
    datasets = pytest.importorskip("datasets")
    hf = datasets.load_dataset("parquet", data_files=files, split="train")
    assert hf.num_rows == rows and len(hf[0]["input_ids"]) == 256
    assert hf[rows - 1]["segment_ids"] == examples[-1]["segment_ids"].tolist()
    duckdb = pytest.importorskip("duckdb")
    ((count, tokens),) = duckdb.sql(f"select count(*), sum(len(input_ids)) from read_parquet({files!r})").fetchall()
    assert count == rows and tokens == rows * 256


def test_python_cache_build_prints_no_beam_import_warning(tmp_path):
    """ds.cache() from Python: Beam's 'apitools not found' import warning is dropped, while
    Beam's real warnings still reach the user."""
    code = (
        "import logging\n"
        "from beamtok import Dataset\n"
        f"ds = Dataset.from_files({str(CORPUS / 'shakespeare-00.jsonl')!r}).tokenize({TOKENIZER!r}).concat_chunk(512)\n"
        f"ds.cache({str(tmp_path / 'c')!r})\n"
        "logging.basicConfig()\n"
        "logging.getLogger('apache_beam.io').warning('a real Beam warning')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "apitools" not in proc.stderr and "a real Beam warning" in proc.stderr


def test_cache_of_a_pipeline_with_a_map_step(corpus, tmp_path):
    """The spec records user steps by name: a cache built with .map(fn) reopens with its spec,
    states cross, and re-running the recorded step without its function is refused."""
    from beamtok._src.cache.read.verify import verify_cache

    def shout(record):
        return {**record, "text": record["text"].upper()}

    ds = Dataset.from_files(corpus[:2]).map(shout, name="shout").tokenize(TOKENIZER).concat_chunk(128)
    cached = ds.cache(str(tmp_path / "c"))
    assert cached.spec.to_json() == ds.spec.to_json() and cached.spec_fingerprint == ds.spec_fingerprint
    check_resumption(lambda: ds.batch(4), random_steps=4, resume_dataset=lambda: cached.batch(4))
    report = verify_cache(str(tmp_path / "c"))
    assert not report.ok and "the map step 'shout' was recorded by name only" in report.problems[0]


def test_cli_cache_with_yaml_config_and_help(tmp_path, corpus):
    config = tmp_path / "cache.yaml"
    config.write_text(
        "urls:\n" + "".join(f"  - {u}\n" for u in corpus[:2]) + f"output: {tmp_path / 'c'}\ntokenizer: {TOKENIZER}\n"
        "seq-len: 128\npack: concat\nbeam_options:\n  direct_num_workers: 1\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "beamtok._src.cli", "cache", "--config", str(config), "--quiet"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 shards" in proc.stdout
    assert_items_equal(list(Dataset.from_cache(str(tmp_path / "c"))), list(online(corpus[:2], seq_len=128)))
    helped = subprocess.run(
        [sys.executable, "-m", "beamtok._src.cli", "cache", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert "--runner=DataflowRunner" in helped.stdout and "--seq-len" in helped.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "beamtok._src.cli",
            "cache",
            corpus[0],
            "-o",
            str(tmp_path / "x"),
            "--tokenizer",
            TOKENIZER,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert (
        bad.returncode == 2 and bad.stderr.strip() == "beamtok: error: --seq-len is required with --pack concat_chunk"
    )


def test_unfinished_and_foreign_directories_are_refused(tmp_path):
    with pytest.raises(CacheError, match="not a beamtok cache"):
        Dataset.from_cache(str(tmp_path))
    os.makedirs(tmp_path / "shards")
    (tmp_path / "shards" / "shard-00000.parquet").write_bytes(b"x")
    with pytest.raises(CacheError, match="unfinished"):
        Dataset.from_cache(str(tmp_path))
    shutil.rmtree(tmp_path / "shards")


@pytest.fixture(scope="module")
def small_groups(corpus, tmp_path_factory):
    """Caches whose shards hold many row groups (2 packed rows, or 1 document, each): seeks land
    inside later groups and document runs cross group boundaries."""
    root = tmp_path_factory.mktemp("small-groups")
    rows = {"concat": 2, "none": 1}
    return {pack: online(corpus, pack).cache(str(root / pack), row_group_rows=n) for pack, n in rows.items()}


@pytest.mark.parametrize("pack", ["concat", "none"])
def test_many_row_groups_read_like_one(corpus, small_groups, pack):
    directory = Path(small_groups[pack].pipeline.root.origin.cache.directory)
    groups = [pq.ParquetFile(p).metadata.num_row_groups for p in sorted((directory / "shards").glob("*.parquet"))]
    assert max(groups) >= 24 and min(groups) >= 2
    assert_items_equal(list(stream(small_groups[pack])), list(stream(online(corpus, pack))))
    make_online = lambda: stream(online(corpus, pack))  # noqa: E731
    make_cached = lambda: stream(small_groups[pack])  # noqa: E731
    check_resumption(make_cached, random_steps=10, seed=5, resume_dataset=make_online)
    check_resumption(make_online, random_steps=10, seed=6, resume_dataset=make_cached)


@pytest.mark.parametrize("pack", ["concat", "none"])
@pytest.mark.parametrize("size", [1, 3, 8])
def test_batches_straight_from_a_cache_are_the_on_the_fly_batches(corpus, small_groups, built, pack, size):
    """``from_cache(dir).batch(n)`` stacks decoded row blocks without a dict per example: the
    batches, counts and states are those of the on-the-fly stream, whether a batch lies in one
    row group, spans row groups (2 rows each) or shards, or the rows are ragged (``--pack none``)."""
    make_online = lambda: online(corpus, pack).batch(size)  # noqa: E731
    for cache in (small_groups[pack], built[pack]):
        make_cached = lambda cache=cache: cache.batch(size)  # noqa: E731
        assert_items_equal(list(make_cached()), list(make_online()))
        check_resumption(make_cached, random_steps=6, seed=size, resume_dataset=make_online)
        check_resumption(make_online, random_steps=6, seed=size + 1, resume_dataset=make_cached)
    for batch in itertools.islice(
        small_groups[pack].batch(size), 6
    ):  # arrays of their own, not views of a decoded row group
        assert all(v.base is None and v.flags.writeable for v in batch.values() if isinstance(v, np.ndarray)), size
    last = list(small_groups[pack].batch(size, drop_last=True))
    assert_items_equal(last, list(online(corpus, pack).batch(size, drop_last=True)))
    torch = pytest.importorskip("torch")
    batch = next(iter(small_groups[pack].batch(size, tensors="torch")))
    assert isinstance(batch["input_ids"], torch.Tensor) and batch["input_ids"].dtype == torch.int32
    batch["input_ids"][0, 0] = -1  # writable, and not the cache's memory
    assert next(iter(small_groups[pack].batch(size)))["input_ids"][0, 0] != -1


def test_closing_a_cache_iterator_releases_its_shards_and_it_reopens_at_its_cursor(corpus, small_groups):
    """Closed or dropped half-read, a stream closes its shard files once the decoding it
    started is done; the decoding threads are one small pool per process, however many
    streams and shards are open."""
    import gc
    import threading

    from beamtok._src.base.prefetch import shared_pool

    shards = Path(small_groups["concat"].pipeline.root.origin.cache.directory) / "shards"

    def open_shards() -> int:
        fds = Path("/proc/self/fd")
        return sum(1 for fd in fds.iterdir() if str(_link(fd)).startswith(str(shards)))

    def helpers() -> int:
        return sum(t.name.startswith("beamtok-prefetch") and t.is_alive() for t in threading.enumerate())

    gc.collect()  # iterators other tests dropped half-read close when collected
    assert open_shards() == 0
    full = list(small_groups["concat"].batch(3))
    it = small_groups["concat"].batch(3).iter()
    head = [next(it) for _ in range(5)]
    assert open_shards() >= 1
    it.close()
    assert open_shards() == 0
    assert_items_equal(head + list(it), full)
    # a stream dropped half-read (not closed) closes its files when collected
    streams = [small_groups["concat"].batch(3).iter() for _ in range(8)]
    for dropped in streams:
        next(dropped)
    assert open_shards() >= 8 and 1 <= helpers() <= shared_pool()._max_workers
    del streams, dropped
    gc.collect()
    deadline = time.monotonic() + 30
    while open_shards() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert open_shards() == 0


def _link(fd: Path) -> str:
    try:
        return os.readlink(fd)
    except OSError:  # closed since it was listed
        return ""


def test_the_next_shards_are_decoded_while_the_stream_reads_the_current_one(built):
    """Two row groups are decoded at once ahead of the stream: the rest of the open shard's,
    then the first ones of the shards it opens next; each stream has its own."""
    first, second = built["concat"].iter(), built["concat"].iter()
    next(first)
    ahead = first.source.backend.ahead
    assert len(ahead.started) >= 2
    assert [key[0] for key in ahead.started] == [shard.index for shard, _ in ahead.upcoming[: len(ahead.started)]]
    next(second)
    assert second.source.backend.ahead is not ahead and ahead.started
    first.close()
    second.close()


def test_many_row_groups_seek_to_every_example(small_groups):
    full = list(small_groups["concat"].iter())
    for n in range(0, len(full), 7):
        got = list(itertools.islice(small_groups["concat"].iter_at(example=n), 4))
        assert_items_equal(got, full[n : n + 4], f"start {n}: ")


PACKERS = {
    "concat_chunk": lambda ds: ds.concat_chunk(200),
    "pad": lambda ds: ds.pad(128),
    "sliding_window": lambda ds: ds.sliding_window(128, stride=96),
    "greedy": lambda ds: ds.pack_examples(512, method="greedy"),
    "first_fit": lambda ds: ds.pack_examples(512, method="first_fit", window=8),
}


@pytest.mark.parametrize("packer", sorted(PACKERS))
def test_every_packer_on_an_unpacked_cache_is_the_on_the_fly_packer(corpus, small_groups, packer):
    """Read-time packing is the same stage as on the fly: same fingerprint, same rows, same
    counts (documents too long for a whole-example row are too_long in both), states crossing."""
    pack = PACKERS[packer]
    check_equivalent(
        lambda: stream(pack(online(corpus, "none"))), lambda: stream(pack(small_groups["none"])), random_steps=5, seed=9
    )
    a = stream(pack(online(corpus, "none"))).iter()
    list(a)
    if packer in ("greedy", "first_fit"):
        assert a.stats()["documents"]["skipped"].get("too_long", 0) > 0  # long documents were met and counted
