"""Tokenization worker processes: identical output for any worker count, exact resume with
workers running, clear errors when a worker dies or reads bad input."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest

from beamtok import Dataset, InputError
from beamtok._src.production.parallel import WorkerError
from beamtok.testing import assert_items_equal, check_resumption

from conftest import write_jsonl


def make(paths, tokenizer_dir, workers, interleave=2):
    return (
        Dataset.from_files(paths)
        .tokenize(tokenizer_dir)
        .ensure_bos_eos()
        .concat_chunk(48)
        .interleave(interleave)
        .parallel(workers)
        .shuffle(window=8, seed=3)
        .batch(3)
    )


@pytest.fixture
def paths(make_shards):
    return make_shards(5, docs_per_shard=10)


def test_output_is_identical_for_any_worker_count(paths, tokenizer_dir):
    reference = list(make(paths, tokenizer_dir, 0))
    assert len(reference) > 10
    for workers, interleave in ((1, 1), (1, 2), (2, 2), (3, 2)):
        assert_items_equal(
            list(make(paths, tokenizer_dir, workers, interleave)), list(make(paths, tokenizer_dir, 0, interleave))
        )
    assert_items_equal(list(make(paths, tokenizer_dir, 2)), reference)


@pytest.mark.parametrize(("workers", "interleave"), [(2, 2), (2, 1), (3, 2)])
def test_open_shards_get_the_workers_and_prefetches_are_read(make_shards, tokenizer_dir, workers, interleave):
    # a prefetch that takes the worker an open shard needs makes that shard run in the
    # consumer's process (or cancels the prefetch): the output stays right, the speed halves
    with make(make_shards(8, docs_per_shard=12), tokenizer_dir, workers, interleave).iter() as it:
        assert len(list(it)) > 10
        backend = it.source.backend
        assert (backend.ran_here, backend.cancelled) == (0, 0)


def test_checkpoints_with_workers_running_resume_exactly(paths, tokenizer_dir):
    check_resumption(lambda: make(paths, tokenizer_dir, 2), random_steps=8)
    check_resumption(
        lambda: make(paths, tokenizer_dir, 2), random_steps=4, resume_dataset=lambda: make(paths, tokenizer_dir, 0)
    )


def test_state_dict_does_not_drain_the_workers(make_shards, tokenizer_dir):
    paths = make_shards(4, docs_per_shard=40)
    it = make(paths, tokenizer_dir, 2).iter()
    next(it)
    pool = it.source.backend
    busy = [w.task.id for w in pool._workers if w.task is not None]
    state = it.state_dict()
    assert busy and [w.task.id for w in pool._workers if w.task is not None] == busy  # still running the same shards
    assert len(json.dumps(state)) < 1536  # positions and counts, no tokens
    it.close()
    assert not pool._workers


def test_workers_start_at_the_first_next_and_stop_with_the_context(make_shards, tokenizer_dir):
    import multiprocessing

    paths = make_shards(4, docs_per_shard=10)
    with make(paths, tokenizer_dir, 2).iter() as it:
        state = it.state_dict()
        assert not multiprocessing.active_children() and not it.source.backend._workers  # nothing forked yet
        resumed = make(paths, tokenizer_dir, 2).iter(state)
        assert not multiprocessing.active_children()
        first = next(it)
        assert len(it.source.backend._workers) == 2
        assert_items_equal([next(resumed)], [first])
        resumed.close()
    assert not it.source.backend._workers and not multiprocessing.active_children()


def test_worker_death_is_a_clear_error(make_shards, tokenizer_dir):
    paths = make_shards(4, docs_per_shard=40)
    it = make(paths, tokenizer_dir, 2, interleave=1).iter()
    next(it)
    workers = it.source.backend._workers
    os.kill(workers[0].process.pid, signal.SIGKILL)
    os.kill(workers[1].process.pid, signal.SIGKILL)
    with pytest.raises(WorkerError, match=r"died with exit code -9 while reading .*part-0"):
        for _ in it:
            pass


def test_bad_input_in_a_worker_raises_in_the_consumer(tmp_path, tokenizer_dir, paragraphs):
    good = [{"text": t} for t in paragraphs(6)]
    bad = str(write_jsonl(tmp_path / "bad.jsonl", [*good, "{oops"]))
    ok = str(write_jsonl(tmp_path / "ok.jsonl", good))
    ds = Dataset.from_files([ok, bad]).tokenize(tokenizer_dir).concat_chunk(16).interleave(2).parallel(2)
    with pytest.raises(InputError, match=r"bad\.jsonl: line 7: malformed JSON"):
        list(ds)


def test_dataloader_workers_run_the_step_in_process(paths, tokenizer_dir):
    torch = pytest.importorskip("torch")
    ds = Dataset.from_files(paths).tokenize(tokenizer_dir).concat_chunk(48).parallel(2)
    loader = torch.utils.data.DataLoader(ds.to_torch(), batch_size=None, num_workers=2)
    got = sorted((int(e["shard"]), int(e["index"])) for e in loader)
    assert got == sorted((e["shard"], e["index"]) for e in ds)


def test_workers_exit_when_their_consumer_is_killed(tmp_path, tokenizer_dir, paragraphs):
    """A training process killed with SIGKILL cannot stop its workers; they notice and exit."""
    import subprocess
    import sys
    import time

    paths = [
        str(write_jsonl(tmp_path / f"k-{i}.jsonl", [{"text": t} for t in paragraphs(400, start=i * 400)]))
        for i in range(2)
    ]
    script = (
        "import sys, time\n"
        "from beamtok import Dataset\n"
        f"ds = Dataset.from_files({paths!r}).tokenize({tokenizer_dir!r}).concat_chunk(16).interleave(2).parallel(2)\n"
        "it = ds.iter(); next(it)\n"
        "print('ready', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    children = [int(p) for p in open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()]
    assert len(children) >= 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{c}") and _alive(c) for c in children):
        time.sleep(0.2)
    assert not any(os.path.exists(f"/proc/{c}") and _alive(c) for c in children), "orphaned workers kept running"


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _sft_shards(tmp_path):
    from conftest import ROOT

    lines = (ROOT / "data" / "sft" / "shakespeare-dialogue.jsonl").read_text().splitlines()[:60]
    return [str(write_jsonl(tmp_path / f"sft-{i}.jsonl", lines[i::3])) for i in range(3)]


PIPELINES = {
    "packed": lambda paths, tok: Dataset.from_files(paths).tokenize(tok).ensure_bos_eos().concat_chunk(48),
    "unpacked": lambda paths, tok: Dataset.from_files(paths).tokenize(tok),
    "records": lambda paths, tok: Dataset.from_files(paths),
    "sft": lambda paths, tok: Dataset.from_files(paths).tokenize_sft(tok, max_length=96).pack_examples(96),
    "sft-packed": lambda paths, tok: Dataset.from_files(paths).tokenize_sft(tok, max_length=96).concat_chunk(64),
    "packed-keep": lambda paths, tok: (
        Dataset.from_files(paths).tokenize(tok).ensure_bos_eos().concat_chunk(48, remainder="keep")
    ),
}


@pytest.mark.parametrize("kind", sorted(PIPELINES))
def test_batches_from_workers_are_the_in_process_batches(make_shards, tmp_path, tokenizer_dir, kind):
    """Workers send column blocks; batch() stacks them directly (ragged rows and raw records
    go example by example): batches, counts and states equal the in-process stream's."""
    paths = _sft_shards(tmp_path) if kind.startswith("sft") else make_shards(4, docs_per_shard=9)
    build = PIPELINES[kind]
    in_process = lambda: build(paths, tokenizer_dir).batch(3)  # noqa: E731
    in_workers = lambda: build(paths, tokenizer_dir).parallel(2).batch(3)  # noqa: E731
    assert_items_equal(list(in_workers()), list(in_process()))
    check_resumption(in_workers, random_steps=5, seed=len(kind), resume_dataset=in_process)
    check_resumption(in_process, random_steps=3, seed=len(kind) + 1, resume_dataset=in_workers)


def test_workers_ship_columns_not_dicts(make_shards, tokenizer_dir):
    import pickle

    from beamtok._src.production.wire import span_from_wire, span_to_wire, spans_of
    from beamtok._src.shards.processor import ShardProcessor
    from beamtok._src.shards.spans import SpanReader
    from beamtok._src.sources.urls import Shard

    (path,) = make_shards(1, docs_per_shard=30)
    for kind, shipped in (("packed", "columns"), ("records", "examples")):
        spec = PIPELINES[kind]([path], tokenizer_dir).spec
        produced = list(ShardProcessor(spec).run(Shard(0, path)))
        wires = [pickle.loads(pickle.dumps(span_to_wire(s))) for s in spans_of(iter(produced))]
        assert {w[0] for w in wires} == {shipped}
        if shipped == "columns":
            assert all(not isinstance(v, dict) for w in wires for v in w[2:4])  # arrays, not examples
            sizes = [len(w[3]) - 1 for w in wires]
            assert sizes[0] == 8 and sizes[1] > 8  # the first block is small, then they grow
            shipped_fields = {name: values for name, values, _ in wires[1][2]}
            assert shipped_fields["input_ids"].dtype == np.uint16  # GPT-2 ids fit 16 bits
            assert shipped_fields["loss_mask"] is None  # exactly the real tokens: not shipped
        again = list(SpanReader(iter(span_from_wire(w) for w in wires)))
        assert_items_equal([p.example for p in again], [p.example for p in produced])
        for a, b in zip(again, produced):
            assert {k: getattr(v, "dtype", None) for k, v in a.example.items()} == {
                k: getattr(v, "dtype", None) for k, v in b.example.items()
            }
        assert [p.cursor for p in again] == [p.cursor for p in produced]
        assert [p.counts for p in again] == [p.counts for p in produced]


@pytest.mark.parametrize("kind", ["packed", "packed-keep", "sft-packed"])
def test_packed_rows_ship_their_layout_instead_of_segment_and_position_ids(make_shards, tmp_path, tokenizer_dir, kind):
    """Rows cut column-wise travel as ids (and an SFT loss mask) with the documents' layout;
    the consumer's rows, made from it, are the per-row packer's, short last row included."""
    import pickle

    from beamtok._src.production.shard_spans import shard_spans
    from beamtok._src.production.wire import span_from_wire, span_to_wire
    from beamtok._src.shards.items import ShardCursor
    from beamtok._src.shards.processor import ShardProcessor
    from beamtok._src.shards.spans import SpanReader
    from beamtok._src.sources.urls import Shard

    path = _sft_shards(tmp_path)[0] if kind.startswith("sft") else make_shards(1, docs_per_shard=30)[0]
    spec = PIPELINES[kind]([path], tokenizer_dir).spec
    wires = [
        pickle.loads(pickle.dumps(span_to_wire(s)))
        for s in shard_spans(ShardProcessor(spec), Shard(0, path), ShardCursor())
    ]
    assert len(wires) > 2
    shipped = {name for w in wires for name, values, _ in w[2] if values is not None}
    assert shipped == ({"input_ids", "loss_mask"} if kind == "sft-packed" else {"input_ids"})
    again = [p.example for p in SpanReader(iter(span_from_wire(w) for w in wires))]
    by_row = [p.example for p in ShardProcessor(spec).run(Shard(0, path))]
    assert_items_equal(again, by_row)
    assert [{k: getattr(v, "dtype", None) for k, v in ex.items()} for ex in again] == [
        {k: getattr(v, "dtype", None) for k, v in ex.items()} for ex in by_row
    ]


def test_the_tokens_counted_from_workers_blocks_are_those_counted_in_process(make_shards, tokenizer_dir):
    """Real and pad tokens of rows packed in a worker (counted there, sent with the block) and
    of the batches made of them: the source's tally and the iterator's match in-process ones."""
    paths = make_shards(3, docs_per_shard=5)
    ds = Dataset.from_files(paths).tokenize(tokenizer_dir).concat_chunk(40)

    def stats(d):
        with d.batch(4).iter() as it:
            for _ in it:
                pass
            return it.stats()

    here, there = stats(ds), stats(ds.interleave(2).parallel(2))
    assert here["pad_tokens"] > 0 and here["delivered"]["pad_tokens"] == here["pad_tokens"]
    keys = ("documents", "examples", "tokens", "pad_tokens", "delivered")
    assert {k: there[k] for k in keys} == {k: here[k] for k in keys}


def test_workers_use_the_encoder_built_before_they_were_forked(make_shards, tokenizer_dir, monkeypatch):
    """The consumer builds the fast-path encoder once, before forking its workers, and they
    use it: one build in all, where each worker used to build its own. Nor is the tokenizer
    serialized for them: a forked worker holds it already."""
    import multiprocessing as mp

    from beamtok._src.transforms import tokenize, tokenizer_registry

    monkeypatch.setattr(tokenizer_registry, "_CACHE", {})  # no encoder an earlier test built
    monkeypatch.setattr(tokenizer_registry, "_BY_NAME", {})
    builds = mp.get_context("fork").Value("i", 0)  # counted in every process
    build = tokenize.choose

    def counted(*args):
        with builds.get_lock():
            builds.value += 1
        return build(*args)

    monkeypatch.setattr(tokenize, "choose", counted)

    def not_serialized(self):
        raise AssertionError("a forked worker holds the tokenizer: nothing to serialize")

    monkeypatch.setattr(tokenize.Tokenizer, "serialize", not_serialized)
    paths = make_shards(3, docs_per_shard=4)
    ds = Dataset.from_files(paths).tokenize(tokenizer_dir).concat_chunk(16)
    got = list(ds.parallel(2))
    assert builds.value == 1
    assert_items_equal(got, list(ds))


def test_a_workers_blocks_come_through_a_pipe_that_holds_one_whole(make_shards, tokenizer_dir):
    """The pipe a worker's blocks come through is widened from Linux's default 64 KB (a block
    of a few hundred KB took a dozen reads, each waiting for the worker to write again)."""
    import fcntl

    from beamtok._src.production.worker_process import PIPE_BYTES

    paths = make_shards(2, docs_per_shard=4)
    with Dataset.from_files(paths).tokenize(tokenizer_dir).concat_chunk(8).parallel(1).iter() as it:
        next(it)
        (worker,) = it.source.backend._workers
        assert fcntl.fcntl(worker.results._reader.fileno(), fcntl.F_GETPIPE_SZ) == PIPE_BYTES > 64 * 1024


def _wait_until(condition, seconds: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_worker_starts_the_next_shard_once_it_has_produced_its_own(make_shards, tokenizer_dir):
    """A worker that has produced all of its shard gets the next one at once, while the
    consumer still reads the first one's last blocks from its queue (before, it waited idle
    until the consumer reached the end): same output."""
    from beamtok._src.shards.items import ShardCursor

    paths = make_shards(2, docs_per_shard=12)
    pipeline = Dataset.from_files(paths).tokenize(tokenizer_dir).concat_chunk(8)
    reference = list(pipeline)
    with pipeline.parallel(1).iter() as it:
        got = [next(it) for _ in range(8)]  # the first block (8 rows) of shard 0
        backend = it.source.backend
        (worker,) = backend._workers
        first = worker.task
        _wait_until(lambda: worker.done.value == first.id)
        got.append(next(it))  # reads shard 0's next block: the idle worker is given shard 1
        assert not first.finished
        assert backend._tasks[(1, ShardCursor())].worker is worker
        got.extend(it)
    assert len(got) > 40
    assert_items_equal(got, reference)


def test_the_next_shard_is_produced_whole_while_the_consumer_reads_another(tmp_path):
    """One shard open at a time, two workers: the worker given the next shard produces all
    of it (more blocks than a 16-block queue holds) while the consumer still reads the first,
    so both workers stay busy without interleave(); the stream is unchanged."""
    from beamtok._src.production.shard_spans import shard_spans
    from beamtok._src.shards.items import ShardCursor
    from beamtok._src.shards.processor import ShardProcessor
    from beamtok._src.sources.urls import Shard
    from beamtok.testing import tiny_tokenizer

    from conftest import real_paragraphs

    records = [{"text": t} for t in real_paragraphs(60)] * 3
    paths = [str(write_jsonl(tmp_path / f"part-{i}.jsonl", records)) for i in range(3)]
    ds = Dataset.from_files(paths).tokenize(tiny_tokenizer()).concat_chunk(8)
    assert len(list(shard_spans(ShardProcessor(ds.spec), Shard(1, paths[1]), ShardCursor()))) > 3 * 16
    with ds.parallel(2).iter() as it:
        got = [next(it)]
        task = it.source.backend._tasks[(1, ShardCursor())]
        _wait_until(lambda: task.worker is not None and task.worker.done.value == task.id, 30)
        assert got[0]["shard"] == 0
        got.extend(it)
    assert_items_equal(got, list(ds))


@pytest.mark.timeout(60)
def test_cancelling_a_shard_keeps_the_blocks_of_the_one_before_it(make_shards, tokenizer_dir, tmp_path, monkeypatch):
    """Shard 1 is started on the worker whose shard 0 is not read to the end, then cancelled:
    the blocks of shard 0 met while stopping shard 1 are kept for shard 0's reader."""
    import numpy as np

    from beamtok._src.production import parallel
    from beamtok._src.production.parallel import ParallelShards
    from beamtok._src.production.shard_spans import shard_spans
    from beamtok._src.shards.items import ShardCursor
    from beamtok._src.shards.processor import ShardProcessor
    from beamtok._src.sources.urls import Shard

    from conftest import real_paragraphs

    small = make_shards(1, docs_per_shard=12)[0]
    big = str(write_jsonl(tmp_path / "big.jsonl", [{"text": t} for t in real_paragraphs(60)] * 8))
    spec = Dataset.from_files([small, big]).tokenize(tokenizer_dir).concat_chunk(4).spec
    shard0, shard1 = Shard(0, small), Shard(1, big)
    monkeypatch.setattr(parallel, "QUEUE_TOKENS", 0)  # the shortest queue (16 blocks): shard 1 fills it
    backend = ParallelShards(spec, 1)
    try:
        spans = backend.open_spans(shard0, ShardCursor())
        got = [next(spans)]
        (worker,) = backend._workers
        first = worker.task
        _wait_until(lambda: worker.done.value == first.id)
        backend.prefetch([(shard1, ShardCursor())])
        second = backend._tasks.pop((1, ShardCursor()))
        assert second.worker is worker and not first.finished
        _wait_until(lambda: worker.results.full())  # shard 1 has filled the queue behind shard 0's blocks
        backend._cancel(second)
        assert backend.cancelled == 1
        got.extend(spans)
    finally:
        backend.close()
    want = list(shard_spans(ShardProcessor(spec), shard0, ShardCursor()))

    def ids(spans):
        return np.concatenate([s.block.columns["input_ids"].values for s in spans if s.block is not None])

    assert len(got) == len(want) > 2
    np.testing.assert_array_equal(ids(got), ids(want))


def test_narrowed_fields_come_back_whole():
    """Integer fields cross the pipe in the narrowest type holding their values, and come
    back in their own type with every value; a mask that is not the real tokens travels."""
    from beamtok._src.production.wire import _packed_fields, _unpacked_fields

    fields = [
        ("input_ids", np.array([70000, 1, 0], dtype=np.int32)),
        ("segment_ids", np.array([1, 1, 0], dtype=np.int32)),
        ("position_ids", np.array([0, 300, 0], dtype=np.int32)),
        ("loss_mask", np.array([0, 1, 0], dtype=np.int8)),
        ("deltas", np.array([-3, 5, 0], dtype=np.int64)),
    ]
    packed = _packed_fields(fields)
    assert [None if v is None else v.dtype for _, v, _ in packed] == [np.int32, np.uint8, np.uint16, np.int8, np.int8]
    back = _unpacked_fields(packed)
    for (name, want), (again, got) in zip(fields, back):
        assert name == again and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    real = [("segment_ids", np.array([2, 2, 0], dtype=np.int32)), ("loss_mask", np.array([1, 1, 0], dtype=np.int8))]
    assert _packed_fields(real)[1][1] is None
    (_, segments), (_, mask) = _unpacked_fields(_packed_fields(real))
    assert mask.dtype == np.int8 and mask.tolist() == [1, 1, 0] and segments.tolist() == [2, 2, 0]


@pytest.mark.parametrize(
    ("values", "narrow"),
    [
        ([0, 255], np.uint8),
        ([0, 256], np.uint16),
        ([0, 65535], np.uint16),
        ([0, 65536], np.int32),  # past every narrow type: shipped as it is
        ([-128, 127], np.int8),
        ([-129, 0], np.int16),
        ([-32768, 32767], np.int16),
        ([-32769, 0], np.int32),
        ([-1, 255], np.int16),  # a negative value rules out the unsigned types
    ],
)
def test_the_narrowest_type_is_chosen_at_each_limit(values, narrow):
    from beamtok._src.production.wire import _packed_fields, _unpacked_fields

    field = np.array(values, dtype=np.int32)
    ((_, shipped, _),) = _packed_fields([("input_ids", field)])
    assert shipped.dtype == narrow
    ((_, back),) = _unpacked_fields(_packed_fields([("input_ids", field)]))
    assert back.dtype == np.int32 and back.tolist() == values
