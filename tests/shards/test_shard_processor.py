"""ShardProcessor: provenance, cursor-after, exact reopening at every cursor, accounting."""

from __future__ import annotations

import json

import pytest

from beamtok import Dataset, InputError
from beamtok.extend import DocCounts, Shard, ShardCursor, ShardProcessor
from beamtok.testing import assert_items_equal

from conftest import write_jsonl


def spec_for(paths, tokenizer_dir, pack="concat", seq_len=48, on_error="raise", stride=None):
    ds = Dataset.from_files(paths, on_error=on_error).tokenize(tokenizer_dir).ensure_bos_eos()
    if pack == "concat":
        ds = ds.concat_chunk(seq_len)
    elif pack == "pad":
        ds = ds.pad(seq_len)
    elif pack == "window":
        ds = ds.sliding_window(seq_len, stride=stride)
    return ds.spec


@pytest.mark.parametrize("compression", [None, "gz", "zst"])
@pytest.mark.parametrize("pack", ["concat", "pad", "window", "none"])
def test_reopening_at_every_cursor_yields_the_remainder(make_shards, tokenizer_dir, compression, pack):
    (path,) = make_shards(1, docs_per_shard=25, compression=compression)
    proc = ShardProcessor(spec_for([path], tokenizer_dir, pack, seq_len=40, stride=16))
    shard = Shard(3, path)
    full = list(proc.run(shard))
    examples = [p.example for p in full]
    assert len(examples) > 5
    assert [e["index"] for e in examples] == list(range(len(examples)))
    assert all(e["shard"] == 3 for e in examples)
    for k, produced in enumerate(full):
        cursor = ShardCursor.from_json(json.loads(json.dumps(produced.cursor.to_json())))
        if k + 1 < len(full):  # the cursor after example k is where example k+1 starts
            nxt = examples[k + 1]
            assert (cursor.index, cursor.doc, cursor.token) == (nxt["index"], nxt["doc"], nxt["token"])
        else:
            assert cursor.done
        rest = [p.example for p in proc.run(shard, cursor)]
        assert_items_equal(rest, examples[k + 1 :], f"resume after {k}: ")


def test_provenance_points_into_the_document(make_shards, tokenizer_dir, gpt2):
    (path,) = make_shards(1, docs_per_shard=10)
    examples = [p.example for p in ShardProcessor(spec_for([path], tokenizer_dir, seq_len=32)).run(Shard(0, path))]
    raw = open(path, "rb").read()
    for ex in examples:
        line = raw[ex["doc"] :].split(b"\n", 1)[0]
        doc_ids = [gpt2.eos_id, *gpt2.encode_batch([json.loads(line)["text"]])[0].tolist(), gpt2.eos_id]
        n = int((ex["segment_ids"] == 1).sum())
        assert ex["input_ids"][:n].tolist() == doc_ids[ex["token"] : ex["token"] + n]


def test_counts_add_up_and_skips_are_counted(tmp_path, tokenizer_dir, paragraphs):
    good = [{"text": t} for t in paragraphs(8)]
    lines = [
        good[0],
        "{not json",
        good[1],
        {"body": "x"},
        good[2],
        {"text": 5},
        {"text": ""},
        good[3],
        "[1]",
        *good[4:],
    ]
    path = str(write_jsonl(tmp_path / "mixed.jsonl", lines))
    proc = ShardProcessor(spec_for([path], tokenizer_dir, seq_len=32, on_error="skip"))
    full = list(proc.run(Shard(0, path)))
    total = sum((p.counts for p in full), DocCounts())
    assert total.read == len(lines) == total.emitted + sum(total.skipped.values())
    assert total.emitted == 8
    assert dict(total.skipped) == {
        "malformed_json": 1,
        "missing_field": 1,
        "wrong_type": 1,
        "empty": 1,
        "not_an_object": 1,
    }
    for k, produced in enumerate(full[:-1]):  # counts after a resume continue exactly
        rest = list(proc.run(Shard(0, path), produced.cursor))
        resumed = sum((p.counts for p in full[: k + 1] + rest), DocCounts())
        assert resumed.to_json() == total.to_json()


@pytest.mark.parametrize(
    "line,message",
    [
        ("{not json", r"bad\.jsonl: line 3: malformed JSON"),
        ('{"body": "x"}', r"bad\.jsonl: line 3: no field 'text'"),
        ('{"text": null}', r"bad\.jsonl: line 3: field 'text' is NoneType, expected a string"),
        ("[1, 2]", r"bad\.jsonl: line 3: expected a JSON object, got list"),
    ],
)
def test_raise_policy_names_file_and_line(tmp_path, tokenizer_dir, line, message):
    path = str(write_jsonl(tmp_path / "bad.jsonl", [{"text": "one"}, {"text": "two"}, line, {"text": "four"}]))
    proc = ShardProcessor(spec_for([path], tokenizer_dir, seq_len=4))
    with pytest.raises(InputError, match=message):
        list(proc.run(Shard(0, path)))


def test_shard_without_examples_still_reports_counts(tmp_path, tokenizer_dir):
    path = str(write_jsonl(tmp_path / "empty.jsonl", [{"text": ""}, {"text": ""}]))
    (only,) = ShardProcessor(spec_for([path], tokenizer_dir)).run(Shard(0, path))
    assert only.example is None and only.cursor.done and only.counts.skipped == {"empty": 2}


def test_untokenized_stream_yields_records(make_shards):
    (path,) = make_shards(1, docs_per_shard=5)
    out = [p.example for p in ShardProcessor(Dataset.from_files(path).spec).run(Shard(0, path))]
    assert [e["index"] for e in out] == list(range(5)) and all(isinstance(e["text"], str) for e in out)
