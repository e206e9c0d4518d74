"""The read-ahead helper: items in order, one at a time per reader, on one shared pool of
threads that a forked process replaces, and nothing made after close()."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest

from beamtok._src.base.prefetch import Prefetcher, shared_pool


class Recorder:
    """make(key) that notes how many calls of one prefetcher overlap."""

    def __init__(self, delay: float = 0.002) -> None:
        self.delay = delay
        self.inside = 0
        self.most_inside = 0
        self.made: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, key: int) -> int:
        with self.lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        time.sleep(self.delay)
        with self.lock:
            self.inside -= 1
            self.made.append(key)
        return key * 10


def test_items_come_in_order_and_one_reader_never_makes_two_at_once():
    """A reader's items read one file: two threads on it at once corrupt the read."""
    recorders = [Recorder() for _ in range(6)]
    readers = [Prefetcher(r, range(30), ahead=3) for r in recorders]
    for _ in range(30):
        for reader in readers:
            next(reader)
    for reader in readers:
        with pytest.raises(StopIteration):
            next(reader)
    assert all(r.made == list(range(30)) and r.most_inside == 1 for r in recorders)
    assert list(Prefetcher(lambda k: k * 10, range(5), ahead=2)) == [0, 10, 20, 30, 40]


def test_many_readers_share_a_few_threads():
    before = threading.active_count()
    readers = [Prefetcher(Recorder(0.0), range(3)) for _ in range(200)]
    for reader in readers:
        assert list(reader) == [0, 10, 20]
    assert threading.active_count() - before <= shared_pool()._max_workers


def test_an_error_surfaces_where_its_item_is_taken():
    def make(key: int) -> int:
        if key == 2:
            raise ValueError("item 2 is bad")
        return key

    reader = Prefetcher(make, range(5), ahead=2)
    assert [next(reader), next(reader)] == [0, 1]
    with pytest.raises(ValueError, match="item 2 is bad"):
        next(reader)


def test_close_waits_for_the_running_item_and_starts_no_other():
    recorder = Recorder(delay=0.05)
    reader = Prefetcher(recorder, range(100), ahead=4)
    time.sleep(0.01)  # the first item is being made
    reader.close()
    assert recorder.inside == 0  # waited for it
    made = list(recorder.made)
    time.sleep(0.2)
    assert recorder.made == made and len(made) <= 1  # nothing queued ran after close


def _use_in_child(queue) -> None:
    queue.put(list(Prefetcher(lambda k: k + 1, range(4))))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_process_gets_its_own_pool():
    """DataLoader workers are forked from a process whose pool threads do not exist in them."""
    assert list(Prefetcher(lambda k: k, range(3))) == [0, 1, 2]  # the parent's pool is running
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_use_in_child, args=(queue,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0 and queue.get(timeout=5) == [1, 2, 3, 4]


@pytest.mark.slow  # a whole job: make test-fast leaves it out
def test_a_cache_left_part_read_at_interpreter_exit_says_nothing(tmp_path):
    """A reader still open when Python exits is closed after module globals are cleared; it
    must close quietly (after a Beam build in the same process it printed "Exception ignored
    ... 'NoneType' object is not callable" from the prefetcher's close)."""
    import subprocess
    import sys

    from conftest import TOKENIZER_DIR, real_paragraphs, write_jsonl

    files = [
        str(write_jsonl(tmp_path / f"in-{i}.jsonl", [{"text": p} for p in real_paragraphs(30, start=30 * i)]))
        for i in range(2)
    ]
    code = (
        "from beamtok import Dataset\n"
        f"ds = Dataset.from_files({files!r}).tokenize({str(TOKENIZER_DIR)!r}).concat_chunk(64)\n"
        f"cached = ds.cache({str(tmp_path / 'cache')!r}, progress=False)\n"
        "it = cached.shuffle(window=8, seed=0).batch(2).iter()\n"
        "next(it)\n"
        "print('read')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout == "read\n", proc.stderr
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
