"""The command line as a user meets it: strict options, log levels, stats, inspect, head."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from beamtok import Dataset
from beamtok._src.base.errors import ConfigError
from beamtok._src.cli import main

from conftest import CORPUS, ROOT, TOKENIZER_DIR

TOKENIZER = str(TOKENIZER_DIR)
SHARD = str(CORPUS / "shakespeare-00.jsonl")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        (
            ["--text-feild=body"],
            "no such option: --text-feild (neither a beamtok option nor a Beam pipeline option); did you mean --text-field?",
        ),
        (
            ["--seqlen", "512"],
            "no such option: --seqlen (neither a beamtok option nor a Beam pipeline option); did you mean --seq-len?",
        ),
        (
            ["--owerwrite"],
            "no such option: --owerwrite (neither a beamtok option nor a Beam pipeline option); did you mean --overwrite?",
        ),
        (["--direct_num_wokers=2"], "did you mean --direct_num_workers?"),
        (["--zzzz"], "no such option: --zzzz (neither a beamtok option nor a Beam pipeline option)"),
        (["--direct_num_workers=two"], "Beam option: argument --direct_num_workers: invalid int value: 'two'"),
        (["--direct_running_mode=bogus"], "invalid choice: 'bogus'"),
        (["--runner"], "Beam option --runner needs a value (--runner=VALUE)"),
    ],
)
def test_cache_refuses_options_neither_beamtok_nor_beam_knows(tmp_path, typed, message):
    code, out, err = run("cache", SHARD, "-o", str(tmp_path / "c"), "--tokenizer", TOKENIZER, "--seq-len", "64", *typed)
    assert code == 2, out + err
    assert err.startswith("beamtok: error: ") and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c").exists()  # nothing was built


def test_beam_options_are_split_from_urls_by_beams_parser():
    from beamtok._src.beam.options import split_command_line

    tokens = [
        SHARD,
        "--runner",
        "DirectRunner",
        "b.jsonl",
        "--direct_num_workers",
        "2",
        "--save_main_session",
        "--job_name=x",
    ]
    urls, beam = split_command_line(tokens, ["--output"])
    assert urls == [SHARD, "b.jsonl"]
    assert beam == ["--runner", "DirectRunner", "--direct_num_workers", "2", "--save_main_session", "--job_name=x"]


def test_yaml_beam_options_and_python_beam_options_are_checked(tmp_path):
    config = tmp_path / "cache.yaml"
    config.write_text(
        f"urls: [{SHARD}]\noutput: {tmp_path / 'c'}\ntokenizer: {TOKENIZER}\nseq-len: 64\nbeam_options:\n  direct_num_wrkers: 1\n"
    )
    code, _, err = run("cache", "--config", str(config))
    assert (
        code == 2
        and f"{config}: beam_options: no such option: --direct_num_wrkers" in err
        and "--direct_num_workers?" in err
    )
    ds = Dataset.from_files([SHARD]).tokenize(TOKENIZER).concat_chunk(64)
    with pytest.raises(ConfigError, match="did you mean --direct_running_mode"):
        ds.cache(str(tmp_path / "c"), direct_runing_mode="in_memory")
    assert not (tmp_path / "c").exists()


@pytest.fixture(scope="module")
def small_cache(tmp_path_factory):
    """Two real-text files, their concat cache (rows of 64 cut documents into pieces)."""
    from conftest import real_paragraphs, write_jsonl

    root = tmp_path_factory.mktemp("stats")
    paragraphs = real_paragraphs(120)
    files = [
        str(write_jsonl(root / f"part-{i}.jsonl", [{"text": p} for p in paragraphs[i * 60 : (i + 1) * 60]]))
        for i in range(2)
    ]
    Dataset.from_files(files).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(64).cache(
        str(root / "cache"), progress=False
    )
    return files, str(root / "cache"), paragraphs


def test_stats_of_a_cache_and_of_its_files_count_every_document_exactly(small_cache, tmp_path):
    import json

    from transformers import AutoTokenizer

    files, cache, paragraphs = small_cache
    reference = AutoTokenizer.from_pretrained(TOKENIZER)
    lengths = sorted(len(reference(p)["input_ids"]) + 2 for p in paragraphs)  # BOS and EOS added
    code, out, _ = run("stats", cache, "--json")
    assert code == 0
    of_cache = json.loads(out)
    code, out, _ = run("stats", *files, "--tokenizer", TOKENIZER, "--json", "--documents", "1000")
    of_files = json.loads(out)
    for summary in (of_cache, of_files):
        read = summary["read"]
        assert summary["documents"]["read"] == 120 and summary["documents"]["skipped"] == {}
        assert read["tokens"] == sum(lengths)
        dist = read["document_tokens"]
        assert dist["count"] == 120 and dist["min"] == lengths[0] and dist["max"] == lengths[-1]
        assert dist["p50"] == pytest.approx(float(np.percentile(lengths, 50)))
        assert [s["documents"] for s in summary["shards"]] == [60, 60]
    assert of_cache["read"]["row_length"] == 64 and of_cache["read"]["row_fill"]["max"] == 1.0
    assert of_cache["read"]["pad_tokens"] == of_cache["totals"]["pad_tokens"] > 0
    assert of_files["read"]["row_fill"] is None  # documents of every length: no fill to speak of
    code, out, _ = run("stats", cache, "--limit", "10", "--json")
    assert json.loads(out)["read"]["rows"] == 10 and json.loads(out)["read"]["complete"] is False
    code, out, _ = run("stats", cache)
    assert "document length (tokens): min" in out and f"max {lengths[-1]:,}" in out and "shard  rows" in out


def test_stats_of_sft_data_split_prompt_and_completion(tmp_path):
    import json

    from conftest import write_jsonl

    records = [
        {"prompt": f"Question {i}: what follows {i}?\n", "completion": " the number " + "one " * (i % 7 + 1)}
        for i in range(40)
    ]
    records.append("{broken")
    path = str(write_jsonl(tmp_path / "sft.jsonl", records))
    code, out, err = run("stats", path, "--tokenizer", TOKENIZER, "--records", "sft", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["documents"]["skipped"] == {"malformed_json": 1} and summary["documents"]["read"] == 41
    it = Dataset.from_files([path], on_error="skip").tokenize_sft(TOKENIZER).iter()
    want = [(int((ex["loss_mask"] == 0).sum()), int(ex["loss_mask"].sum())) for ex in it]
    read = summary["read"]
    assert read["prompt_tokens"]["count"] == 40
    assert read["prompt_tokens"]["max"] == max(p for p, _ in want) and read["completion_tokens"]["min"] == min(
        c for _, c in want
    )
    assert read["trained_fraction"] == pytest.approx(sum(c for _, c in want) / sum(p + c for p, c in want))


def test_stats_plot_is_a_real_png(small_cache, tmp_path):
    import matplotlib.image

    _, cache, _ = small_cache
    png = tmp_path / "stats.png"
    code, _, err = run("stats", cache, "--plot", str(png))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(str(png))
    assert image.shape[0] > 200 and image.shape[1] > 600  # two panels side by side
    assert image[..., :3].std() > 0.05  # something was drawn


def test_stats_mistakes(small_cache, tmp_path):
    files, cache, _ = small_cache
    assert run("stats", files[0])[0] == 2
    assert "input files need --tokenizer" in run("stats", files[0])[2]
    code, _, err = run("stats", cache, "--tokenizer", TOKENIZER)
    assert code == 2 and "is a cache: it brings its own tokenizer" in err
    code, _, err = run("stats", str(tmp_path / "nothing.jsonl"), "--tokenizer", TOKENIZER)
    assert code == 2 and "nothing.jsonl" in err


PIPELINE = """
from beamtok import Dataset

FILES = {files!r}


def packed(seq_len=64):
    return Dataset.from_files(FILES).tokenize({tokenizer!r}).ensure_bos_eos().concat_chunk(seq_len).interleave(3)


ds = packed().shuffle(8, seed=1).batch(2)
longer = packed(128).shuffle(8, seed=1).batch(2)
mixed = Dataset.mix([packed(), Dataset.from_files(FILES[:1]).tokenize({tokenizer!r}).concat_chunk(64)], weights=[0.5, 0.5])
"""


def test_inspect_says_where_each_open_shard_stands(tmp_path):
    import json

    from conftest import real_paragraphs, write_jsonl

    paragraphs = real_paragraphs(90)
    files = [
        str(write_jsonl(tmp_path / "a.jsonl", [{"text": p} for p in paragraphs[:30]])),
        str(write_jsonl(tmp_path / "b.jsonl.gz", [{"text": p} for p in paragraphs[30:60]], compression="gz")),
        str(tmp_path / "c.parquet"),
    ]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": paragraphs[60:]}), files[2])
    (tmp_path / "pipe.py").write_text(PIPELINE.format(files=files, tokenizer=TOKENIZER))
    import importlib.util

    spec = importlib.util.spec_from_file_location("pipe_for_test", tmp_path / "pipe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    it = module.ds.iter()
    for _ in range(7):
        next(it)
    state = it.state_dict()
    slots = {slot["shard"]: slot["cursor"] for slot in state["pipeline"]["upstream"]["upstream"]["slots"]}
    assert sorted(slots) == [0, 1, 2] and all(c["doc"] > 0 for c in slots.values())
    checkpoint = tmp_path / "trainer_state.json"
    checkpoint.write_text(
        json.dumps({"global_step": 7, "stateful_callbacks": {"BeamtokCallback": {"attributes": {"state": state}}}})
    )
    code, out, err = run("inspect", str(checkpoint), "--pipeline", f"{tmp_path / 'pipe.py'}:ds")
    assert code == 0, err
    assert "== state at stateful_callbacks.BeamtokCallback.attributes.state" in out
    assert "reader: rank 0 of 1, DataLoader worker 0 of 1, data split by shards" in out
    with open(files[0], "rb") as f:  # the byte offset is where a line (a document) begins
        f.seek(slots[0]["doc"] - 1)
        assert f.read(1) == b"\n"
    assert (
        f"shard 0 ({files[0]}): next example {slots[0]['index']} of the shard starts at byte {slots[0]['doc']:,}, token {slots[0]['token']}"
        in out
    )
    assert (
        f"shard 1 ({files[1]}): next example {slots[1]['index']} of the shard starts at line {slots[1]['doc'] + 1},"
        in out
    )
    assert (
        f"shard 2 ({files[2]}): next example {slots[2]['index']} of the shard starts at row {slots[2]['doc']}," in out
    )
    window = state["pipeline"]["upstream"]
    assert (
        f"stage 1 (shuffle): window {window['window']} (counted over the whole stream), {window['emitted']} of its examples delivered"
        in out
    )
    assert "stage 2 (batch): no position of its own" in out and out.rstrip().endswith(
        f"resumes {tmp_path / 'pipe.py'}:ds"
    )
    code, out, _ = run("inspect", str(checkpoint), "--pipeline", f"{tmp_path / 'pipe.py'}:longer")
    assert code == 1 and "does NOT resume" in out and "packing: seq_len 64 → 128" in out
    code, out, _ = run("inspect", str(checkpoint))
    assert (
        code == 0 and "shard 1: next example" in out and "resumes" not in out
    )  # no pipeline: indices and cursors only

    mixed = module.mixed.iter()
    for _ in range(5):
        next(mixed)
    (tmp_path / "mix.json").write_text(json.dumps(mixed.state_dict()))
    code, out, _ = run("inspect", str(tmp_path / "mix.json"), "--pipeline", f"{tmp_path / 'pipe.py'}:mixed")
    assert code == 0 and "mix: 5 examples decided so far" in out and "  mix source 1:" in out and f"({files[0]})" in out


def test_inspect_mistakes(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = run("inspect", str(tmp_path / "bad.json"))
    assert (
        code == 2 and f"{tmp_path / 'bad.json'}: not JSON: Expecting property name" in err and "line 1 column 2" in err
    )
    (tmp_path / "other.json").write_text('{"step": 3}')
    code, _, err = run("inspect", str(tmp_path / "other.json"))
    assert code == 2 and "holds no beamtok state" in err
    (tmp_path / "s.json").write_text('{"beamtok_state": 1, "split": {}, "pipeline": {}}')
    code, _, err = run("inspect", str(tmp_path / "s.json"), "--pipeline", "nowhere.py:ds")
    assert code == 2 and "nowhere.py does not exist" in err
    code, _, err = run("inspect", str(tmp_path / "s.json"), "--pipeline", "json:dumps")
    assert code == 2 and "--pipeline json:dumps: calling dumps() failed: TypeError" in err
    code, _, err = run("inspect", str(tmp_path / "s.json"), "--pipeline", "json:decoder")
    assert code == 2 and "--pipeline json:decoder: decoder is a module, not a beamtok Dataset" in err


def test_head_shows_pieces_ids_and_what_is_trained_on(small_cache, tmp_path):
    import json

    import pyarrow.parquet as pq

    _, cache, _ = small_cache
    code, out, err = run("head", cache, "--no-shuffle", "--batches", "2", "--batch-size", "3", "--json", "--ids")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    rows, stats = lines[:-1], lines[-1]["stats"]
    table = pq.read_table(f"{cache}/shards/shard-00000.parquet").to_pylist()
    assert [r["index"] for r in rows] == list(range(6))
    for r in rows:
        stored = table[r["index"]]
        real = [t for t, s in zip(stored["input_ids"], stored["segment_ids"]) if s > 0]
        assert [i for p in r["pieces"] for i in p["ids"]] == real
        first = r["pieces"][0]
        assert first["starts_document"] == (stored["token"] == 0) and first["offset"] == stored["token"]
        assert all(p["starts_document"] and p["offset"] == 0 for p in r["pieces"][1:])
    assert stats["delivered"] == {
        "items": 2,
        "examples": 6,
        "tokens": sum(p["tokens"] for r in rows for p in r["pieces"]),
        "pad_tokens": stats["delivered"]["pad_tokens"],
    }
    code, out, _ = run("head", cache, "--batches", "1", "--batch-size", "1", "--max-chars", "20")
    texts = out.split("\n")
    assert (
        all(len(line) <= 20 + len("… (+99999 chars)") for line in texts[2:-3] if not line.startswith("["))
        and "… (+" in out
    )
    assert (
        "delivered: 1 rows, 64 tokens" in out and "read from the cache (the shuffle window reads ahead): 79 rows" in out
    )  # all of it


def test_head_marks_prompt_tokens_of_sft_rows(tmp_path):
    from conftest import write_jsonl

    records = [{"prompt": f"Q{i}: name a number.\n", "completion": f" {i} is one."} for i in range(12)]
    path = str(write_jsonl(tmp_path / "sft.jsonl", records))
    Dataset.from_files([path]).tokenize_sft(TOKENIZER).pack_examples(64).cache(str(tmp_path / "c"), progress=False)
    code, out, err = run("head", str(tmp_path / "c"), "--no-shuffle", "--batches", "1", "--batch-size", "1", "--mask")
    assert code == 0, err
    assert "[segment 1: new document," in out and "[segment 2: new document," in out
    assert "«Q0: name a number.\n» 0 is one." in out and "«Q1: name a number.\n» 1 is one." in out


@pytest.mark.parametrize("ranges", [False, True], ids=["whole_file", "byte_ranges"])
@pytest.mark.parametrize("absolute", [False, True])
def test_verify_finds_inputs_from_any_directory_and_after_they_move(tmp_path, monkeypatch, absolute, ranges):
    from conftest import real_paragraphs, write_jsonl

    work = tmp_path / "work"
    (work / "in").mkdir(parents=True)
    write_jsonl(work / "in" / "a.jsonl", [{"text": p} for p in real_paragraphs(20)])
    monkeypatch.chdir(work)
    url = str(work / "in" / "a.jsonl") if absolute else "in/a.jsonl"
    ds = Dataset.from_files([url], split_bytes=2000 if ranges else None)
    assert all(("#range=" in shard.url) == ranges for shard in ds.shards)  # a range: its file's URL and #range=
    ds.tokenize(TOKENIZER).concat_chunk(64).cache(str(tmp_path / "c"), progress=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = run("verify", str(tmp_path / "c"), "-q", "--shards", "1")
    assert code == 0, err
    assert "1 shard(s) re-run and compared" in out and "equal the on-the-fly stream row by row" in out
    (work / "in").rename(tmp_path / "moved")
    (tmp_path / "new").mkdir()
    (tmp_path / "moved").rename(tmp_path / "new" / "in")
    code, out, err = run("verify", str(tmp_path / "c"), "-q", "--shards", "1")
    mark = "#range=" if ranges else ""
    assert code == 1 and f"cannot re-run: input {url}{mark}" in err
    assert f" is not at {work / 'in' / 'a.jsonl'}{mark}" in err and "; pass --source-root DIR" in err
    code, out, err = run("verify", str(tmp_path / "c"), "-q", "--source-root", str(tmp_path / "new"))
    assert code == 0 and "shard(s) re-run and compared" in out, err
    code, out, err = run("verify", str(tmp_path / "c"), "-q", "--shards", "0")
    assert code == 0 and "no shard was re-run" in out and "row by row" not in out


def test_missing_chat_template_names_the_option_where_it_was_called(tmp_path):
    import json

    from conftest import ROOT

    chat = str(ROOT / "data" / "sft" / "pydocs-chat.jsonl")
    code, _, err = run(
        "cache", chat, "-o", str(tmp_path / "c"), "--format", "chat", "--tokenizer", TOKENIZER, "--seq-len", "128"
    )
    assert (
        code == 2
        and err.strip()
        == f"beamtok: error: tokenizer {TOKENIZER!r} has no chat template; pass --chat-template FILE (a Jinja template)"
    )
    code, _, err = run("stats", chat, "--format", "chat", "--tokenizer", TOKENIZER)
    assert code == 2 and "pass --chat-template FILE" in err
    code, out, err = run(
        "stats",
        chat,
        "--format",
        "chat",
        "--tokenizer",
        TOKENIZER,
        "--chat-template",
        str(ROOT / "data" / "sft" / "chat_template.jinja"),
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["read"]["prompt_tokens"]["count"] > 0
    with pytest.raises(ConfigError, match=r"has no chat template; pass template= \(a Jinja file or string\)"):
        Dataset.from_files([chat]).tokenize_chat(TOKENIZER)


def test_a_tokenizer_without_bos_names_the_flag_a_command_line_user_needs(tmp_path):
    bert = str(ROOT / "data" / "tokenizers" / "bert-base-uncased")
    code, _, err = run("cache", SHARD, "-o", str(tmp_path / "c"), "--tokenizer", bert, "--seq-len", "128")
    assert (
        code == 2
        and err.strip() == f"beamtok: error: tokenizer {bert!r} has no BOS token; pass --no-bos to build without one"
    )
    code, _, err = run("cache", SHARD, "-o", str(tmp_path / "c"), "--tokenizer", bert, "--seq-len", "128", "--no-bos")
    assert code == 2 and "has no EOS token; pass --no-eos" in err
    with pytest.raises(ConfigError, match=r"call ensure_bos_eos\(bos=False\)"):  # the Python call is named in Python
        Dataset.from_files([SHARD]).tokenize(bert).ensure_bos_eos()


def test_packing_is_named_by_the_dataset_method_everywhere(tmp_path):
    import json

    cache = tmp_path / "c"
    Dataset.from_files([SHARD]).tokenize(TOKENIZER).ensure_bos_eos().pack_documents(512).cache(
        str(cache), progress=False
    )
    code, out, _ = run("stats", str(cache))
    assert code == 0 and "packing: pack_documents, rows of 512 tokens" in out
    code, out, _ = run("stats", str(cache), "--json")
    assert json.loads(out)["packing"]["stage"] == "pack_documents" and "mode" not in json.loads(out)["packing"]
    it = Dataset.from_files([SHARD]).tokenize(TOKENIZER).concat_chunk(64).batch(2).iter()
    next(it)
    (tmp_path / "state.json").write_text(json.dumps(it.state_dict()))
    code, out, _ = run("inspect", str(tmp_path / "state.json"))
    assert code == 0 and "packing: concat_chunk, rows of 64 tokens" in out
    code, out, _ = run("cache", "--help")
    described = out.split("--pack ")[1]  # the option list after the choices, which keep the older names as aliases
    for old in ("best_fit:", "concat row", "first_fit window", "best_fit window"):
        assert old not in described, old
