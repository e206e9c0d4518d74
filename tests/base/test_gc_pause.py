"""gc_paused: the cyclic collector is off inside the block and back as it was after, also when
blocks of several threads overlap, when a block raises and when the caller had turned it off;
importing Beam and building a fast-path encoder (both paused) leave a process collecting."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading

import pytest

from beamtok._src.base.gc_pause import gc_paused

from conftest import ROOT


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    gc.enable() if was else gc.disable()


def test_the_collector_is_off_inside_and_on_after():
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # an inner block's end does not resume it
    assert gc.isenabled()


def test_a_block_that_raises_resumes_it():
    with pytest.raises(KeyError), gc_paused():
        raise KeyError("x")
    assert gc.isenabled()


def test_a_callers_own_disable_stands():
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_overlapping_blocks_of_two_threads_resume_it_when_the_last_ends():
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    with gc_paused():
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # this thread's block ended, the other's has not
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_importing_beam_and_building_an_encoder_leave_the_process_collecting():
    code = (
        "import gc, beamtok._src.beam.beam_import\n"
        "from beamtok import load_tokenizer\n"
        f"tok = load_tokenizer({str(ROOT / 'data' / 'tokenizers' / 'gpt2')!r})\n"
        "assert tok.engine_choice.encoder is not None\n"
        "print(gc.isenabled())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"]
