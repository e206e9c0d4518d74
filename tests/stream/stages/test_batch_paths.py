"""batch() has two ways in: decoded row blocks stacked column-wise (a cache read in order, the
on-the-fly column path), and examples collated one dict each (any other upstream). The same
rows give the same batch either way: every field, dtype and padding, the token counts, and
with the packed-row conventions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from beamtok import Dataset
from beamtok._src.stream.node import Node
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.stages.batch import Batch, BatchNode

from conftest import cache_without_beam, real_paragraphs, small_vocab_tokenizer, write_jsonl


class ExamplesOnly(Node):
    """``inner`` without its row blocks: the batch takes its examples one by one."""

    def __init__(self, inner: Node) -> None:
        self.inner = inner

    def __next__(self) -> Any:
        return next(self.inner)

    def state_dict(self) -> dict[str, Any]:
        return self.inner.state_dict()

    def reset(self, state: dict[str, Any] | None) -> None:
        self.inner.reset(state)

    def merge(self, states, olds, new):  # type: ignore[no-untyped-def]
        return self.inner.merge(states, olds, new)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("paths")
    return [
        str(write_jsonl(root / f"in-{i}.jsonl", [{"text": p} for p in real_paragraphs(25, start=25 * i)]))
        for i in range(3)
    ]


def both_ways(ds: Dataset, config: Batch) -> tuple[list[Any], list[Any], bool]:
    """The batches of ``ds`` batched by ``config`` through blocks and through examples, and
    whether the block path was taken at all."""
    out = []
    took_blocks = False
    for hide in (False, True):
        source, node = ds.pipeline.build(ReaderSplit())
        if hide:
            node = ExamplesOnly(node)
        elif node.next_rows(0) is not None:
            took_blocks = True
            source.close()
            source, node = ds.pipeline.build(ReaderSplit())
        out.append(list(BatchNode(node, config, ds.pipeline.root.pad_id)))
        source.close()
    return out[0], out[1], took_blocks


def assert_same(blocks: list[Any], examples: list[Any]) -> None:
    assert len(blocks) == len(examples) > 1
    for a, b in zip(blocks, examples):
        assert list(a) == list(b)
        for key in a:
            x, y = np.asarray(a[key]), np.asarray(b[key])
            assert x.dtype == y.dtype and x.shape == y.shape and (x == y).all(), key
        if a.counted is not None:  # the block path counts tokens as it stacks: the counts of the rows themselves
            seg = np.asarray(b["segment_ids"])
            assert a.counted == (int((seg > 0).sum()), int((seg == 0).sum()))


@pytest.mark.parametrize(
    "config", [Batch(4), Batch(5, drop_last=True), Batch(3, mask_starts=True, pad_positions="continue")]
)
def test_a_packed_cache_batches_alike_through_blocks_and_examples(files, tmp_path, config):
    cached = cache_without_beam(
        Dataset.from_files(files).tokenize(small_vocab_tokenizer()).ensure_bos_eos().concat_chunk(48),
        str(tmp_path / "c"),
    )
    blocks, examples, took_blocks = both_ways(cached, config)
    assert took_blocks
    assert_same(blocks, examples)


def test_rows_of_several_widths_batch_alike(files, tmp_path):
    """Unpacked token rows: blocks cannot stack, their examples are collated and padded."""
    cached = cache_without_beam(
        Dataset.from_files(files).tokenize(small_vocab_tokenizer()).ensure_bos_eos(), str(tmp_path / "c")
    )
    blocks, examples, _ = both_ways(cached, Batch(4))
    assert_same(blocks, examples)


def test_the_on_the_fly_column_path_batches_alike(files):
    ds = Dataset.from_files(files).tokenize(small_vocab_tokenizer()).ensure_bos_eos().concat_chunk(40)
    blocks, examples, _ = both_ways(ds, Batch(6))
    assert_same(blocks, examples)


def test_sft_rows_batch_alike(tmp_path):
    records = [{"prompt": p[:80], "completion": p[80:200]} for p in real_paragraphs(40)]
    path = write_jsonl(tmp_path / "sft.jsonl", records)
    ds = Dataset.from_files(str(path)).tokenize_sft(small_vocab_tokenizer()).pack_examples(96)
    cached = cache_without_beam(ds, str(tmp_path / "c"))
    for source in (ds, cached):
        blocks, examples, _ = both_ways(source, Batch(4))
        assert_same(blocks, examples)
