"""Fine-tuning data: exact loss masks, EOS placement, truncation, whole-example packing,
training interop with a Hugging Face model, and equivalence/resume across modes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from beamtok import ConfigError, Dataset
from beamtok.testing import assert_items_equal, check_equivalent, check_resumption

from conftest import ROOT, write_jsonl

SFT_DATA = str(ROOT / "data" / "sft" / "shakespeare-dialogue.jsonl")
CHAT_DATA = str(ROOT / "data" / "sft" / "pydocs-chat.jsonl")
TEMPLATE = str(ROOT / "data" / "sft" / "chat_template.jinja")
EOT = 50256


def examples(ds):
    return list(ds)


def trained_text(gpt2, ex):
    return gpt2.decode(ex["input_ids"][ex["labels"] != -100])


def test_mask_is_exact_where_the_boundary_splits_a_token(tmp_path, tokenizer_dir, gpt2):
    prompt, completion = "Say it: Hello wor", "ld, and goodbye"
    joined = gpt2.encode_batch([prompt + completion])[0].tolist()
    apart = gpt2.encode_batch([prompt])[0].tolist() + gpt2.encode_batch([completion])[0].tolist()
    assert joined != apart  # tokenizing the joined text merges across the boundary
    path = write_jsonl(tmp_path / "s.jsonl", [{"prompt": prompt, "completion": completion}])
    (ex,) = examples(Dataset.from_files(str(path)).tokenize_sft(tokenizer_dir))
    n_prompt = len(gpt2.encode_batch([prompt])[0])
    assert ex["input_ids"].tolist() == [*apart, EOT]
    assert (ex["labels"][:n_prompt] == -100).all()
    assert ex["labels"][n_prompt:].tolist() == ex["input_ids"][n_prompt:].tolist()
    assert trained_text(gpt2, ex) == completion + "<|endoftext|>"
    assert gpt2.decode(ex["input_ids"]) == prompt + completion + "<|endoftext|>"
    assert ex["attention_mask"].tolist() == [1] * len(ex["input_ids"])


def test_generation_field_and_custom_names(tmp_path, tokenizer_dir, gpt2):
    path = write_jsonl(tmp_path / "g.jsonl", [{"prompt": "Q?", "generation": " A."}])
    (ex,) = examples(Dataset.from_files(str(path)).tokenize_sft(tokenizer_dir))
    assert trained_text(gpt2, ex) == " A.<|endoftext|>"
    path = write_jsonl(tmp_path / "n.jsonl", [{"instruction": "Q?", "output": " B."}])
    (ex,) = examples(
        Dataset.from_files(str(path)).tokenize_sft(tokenizer_dir, prompt="instruction", completion="output")
    )
    assert trained_text(gpt2, ex) == " B.<|endoftext|>"


def test_explicit_bos_is_masked(tmp_path, tokenizer_dir):
    path = write_jsonl(tmp_path / "b.jsonl", [{"prompt": "Q?", "completion": " A."}])
    (ex,) = examples(Dataset.from_files(str(path)).tokenize_sft(tokenizer_dir, bos=True))
    assert ex["input_ids"][0] == EOT and ex["labels"][0] == -100 and ex["input_ids"][-1] == EOT


@pytest.mark.parametrize("policy", ["completion_tail", "prompt_head", "drop"])
def test_truncation_policies_are_counted(tmp_path, tokenizer_dir, gpt2, policy):
    long_prompt, long_completion = "word " * 30, " answer" * 30
    records = [{"prompt": "Short?", "completion": " Yes."}, {"prompt": long_prompt, "completion": long_completion}]
    path = write_jsonl(tmp_path / "t.jsonl", records)
    it = Dataset.from_files(str(path)).tokenize_sft(tokenizer_dir, max_length=40, truncation=policy).iter()
    out = list(it)
    docs = it.stats()["documents"]
    assert all(len(ex["input_ids"]) <= 40 for ex in out)
    if policy == "drop":
        assert len(out) == 1 and docs["skipped"] == {"too_long": 1} and docs["truncated_docs"] == 0
        return
    assert len(out) == 2 and docs["truncated_docs"] == 1 and len(out[1]["input_ids"]) == 40
    if policy == "completion_tail":
        assert gpt2.decode(out[1]["input_ids"]).startswith(long_prompt)
        assert out[1]["input_ids"][-1] != EOT  # a cut completion does not end with EOS
    else:
        assert gpt2.decode(out[1]["input_ids"]).endswith(long_completion + "<|endoftext|>")
        assert trained_text(gpt2, out[1]) == long_completion + "<|endoftext|>"


def test_prompt_head_without_room_for_the_prompt(tmp_path, tokenizer_dir, gpt2):
    """A completion (+ EOS) that fills max_length exactly keeps no prompt; one that overflows it
    cannot be kept by cutting the prompt and is dropped as too_long, never emitted too long."""
    completion = " answer" * 10  # 10 tokens, 11 with EOS
    records = [{"prompt": "A question?", "completion": completion}] * 2
    path = write_jsonl(tmp_path / "t.jsonl", records)
    exact = Dataset.from_files(str(path)).tokenize_sft(tokenizer_dir, max_length=11, truncation="prompt_head").iter()
    out = list(exact)
    assert len(out) == 2 and all(len(ex["input_ids"]) == 11 for ex in out)
    assert trained_text(gpt2, out[0]) == gpt2.decode(out[0]["input_ids"]) == completion + "<|endoftext|>"
    assert exact.stats()["documents"]["truncated_docs"] == 2
    over = Dataset.from_files(str(path)).tokenize_sft(tokenizer_dir, max_length=10, truncation="prompt_head").iter()
    assert list(over) == [] and over.stats()["documents"]["skipped"] == {"too_long": 2}


def test_chat_masks_every_non_assistant_turn(tokenizer_dir, gpt2):
    record = json.loads(open(CHAT_DATA).readline())
    (ex,) = examples(Dataset.from_sequence([record]).tokenize_chat(tokenizer_dir, template=TEMPLATE))
    assistant = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
    want = "".join(
        f"{content}\n<|end|>\n<|endoftext|>" for content in assistant
    )  # the shipped template ends them with EOS
    assert trained_text(gpt2, ex) == want
    eos_at = np.flatnonzero(ex["input_ids"] == EOT)
    assert len(eos_at) == len(assistant) and (ex["labels"][eos_at] == EOT).all()
    assert "<|user|>" in gpt2.decode(ex["input_ids"]) and "<|user|>" not in trained_text(gpt2, ex)


def test_chat_template_as_a_string_and_bad_records(tokenizer_dir):
    template = open(TEMPLATE).read()
    records = [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
        {"messages": [{"role": "user", "content": "no answer"}]},
        {"messages": "not a list"},
    ]
    it = Dataset.from_sequence(records, on_error="skip").tokenize_chat(tokenizer_dir, template=template).iter()
    assert len(list(it)) == 1
    assert it.stats()["documents"]["skipped"] == {"empty": 1, "wrong_type": 1}
    with pytest.raises(ConfigError, match="has no chat template"):
        Dataset.from_sequence(records).tokenize_chat(tokenizer_dir)


def sft(method=None, seq_len=256, **kw):
    ds = Dataset.from_files(SFT_DATA).tokenize_sft(str(ROOT / "data" / "tokenizers" / "gpt2"), max_length=seq_len)
    return ds.pack_examples(seq_len, method=method, **kw) if method else ds


@pytest.mark.parametrize("method", ["greedy", "first_fit"])
def test_packers_never_split_examples(method):
    originals = {ex["input_ids"].tobytes(): ex for ex in sft()}
    rows = examples(sft(method))
    seen = 0
    for row in rows:
        assert len(row["input_ids"]) == 256
        segs = row["segment_ids"]
        for s in range(1, segs.max() + 1):
            piece = row["input_ids"][segs == s]
            original = originals[piece.tobytes()]  # every segment is one whole example
            assert (row["labels"][segs == s] == original["labels"]).all()
            assert row["position_ids"][segs == s].tolist() == list(range(len(piece)))
            seen += 1
        pad = segs == 0
        assert (row["labels"][pad] == -100).all() and (row["attention_mask"][pad] == 0).all()
        assert (row["input_ids"][pad] == EOT).all()
    assert seen == len(originals)


def test_first_fit_wastes_less_padding_than_greedy():
    waste = {}
    for method in ("greedy", "first_fit"):
        it = sft(method, window=128).iter()
        list(it)
        waste[method] = it.stats()["padding_waste"]
    assert waste["first_fit"] < waste["greedy"]


@pytest.mark.parametrize("method", ["greedy", "first_fit"])
def test_packers_resume_exactly(method):
    check_resumption(
        lambda: sft(method, seq_len=128, **({"window": 16} if method == "first_fit" else {})).batch(3), random_steps=12
    )


def test_sliding_window_labels_mask_the_overlap(make_shards, tokenizer_dir):
    (path,) = make_shards(1, docs_per_shard=4)
    rows = examples(Dataset.from_files(path).tokenize(tokenizer_dir).sliding_window(32, stride=16))
    by_doc: dict[int, list] = {}
    for row in rows:
        by_doc.setdefault(row["doc"], []).append(row)
    for windows in by_doc.values():
        trained = np.concatenate([w["input_ids"][w["labels"] != -100] for w in windows])
        first = windows[0]
        assert (first["labels"] == first["input_ids"]).all()
        for w in windows[1:]:
            assert (w["labels"][:16] == -100).all()
        assert len(trained) == windows[-1]["token"] + len(windows[-1]["input_ids"])  # each token trained once


def test_hf_causal_lm_loss_equals_loss_by_hand_on_unmasked_positions():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, n_positions=256, vocab_size=50257)
    model = transformers.GPT2LMHeadModel(config).eval()
    for ds in (sft().pad(128).batch(4, tensors="torch"), sft("greedy", seq_len=128).batch(2, tensors="torch")):
        batch = next(iter(ds))
        with torch.no_grad():
            out = model(
                input_ids=batch["input_ids"].long(),
                attention_mask=batch["attention_mask"].long(),
                position_ids=batch["position_ids"].long(),
                labels=batch["labels"].long(),
            )
        logits = out.logits[:, :-1].reshape(-1, config.vocab_size)
        labels = batch["labels"][:, 1:].reshape(-1).long()
        keep = labels != -100
        assert 0 < int(keep.sum()) < labels.numel()
        by_hand = torch.nn.functional.cross_entropy(logits[keep], labels[keep])
        assert torch.allclose(out.loss, by_hand, atol=1e-5)


def test_sft_and_chat_caches_equal_the_stream_and_resume_across_modes(tmp_path, tokenizer_dir):
    pytest.importorskip("apache_beam")
    online_sft = sft("first_fit", seq_len=256, window=32)
    online_chat = (
        Dataset.from_files(CHAT_DATA).tokenize_chat(tokenizer_dir, template=TEMPLATE, max_length=512).pack_examples(512)
    )
    for name, online in (("sft", online_sft), ("chat", online_chat)):
        cached = online.cache(str(tmp_path / name))
        assert_items_equal(examples(cached.shuffle(16, seed=2).batch(4)), examples(online.shuffle(16, seed=2).batch(4)))
        make_online = lambda o=online: o.shuffle(16, seed=2).batch(4)  # noqa: E731
        make_cached = lambda c=cached: c.shuffle(16, seed=2).batch(4)  # noqa: E731
        check_resumption(make_online, random_steps=6, seed=1, resume_dataset=make_cached)
        check_resumption(make_cached, random_steps=6, seed=2, resume_dataset=make_online)
        it_a, it_b = online.iter(), cached.iter()
        list(it_a), list(it_b)
        assert it_a.stats() == it_b.stats()


@pytest.mark.slow  # a whole job: make test-fast leaves it out
def test_cli_builds_sft_and_chat_caches(tmp_path, tokenizer_dir):
    import subprocess
    import sys

    for fmt, data, extra in (("sft", SFT_DATA, []), ("chat", CHAT_DATA, ["--chat-template", TEMPLATE])):
        out = tmp_path / fmt
        cmd = [
            sys.executable,
            "-m",
            "beamtok._src.cli",
            "cache",
            data,
            "--records",
            fmt,
            "--output",
            str(out),
            "--tokenizer",
            tokenizer_dir,
        ]
        cmd += ["--seq-len", "512", "--max-length", "300", "--pack", "first_fit", "-q", *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["totals"]["documents"]["truncated"] > 0  # counted in the manifest
        row = next(iter(Dataset.from_cache(str(out))))
        assert set(row) >= {"input_ids", "labels", "attention_mask", "segment_ids", "position_ids"}


@pytest.mark.parametrize("method", ["greedy", "first_fit"])
def test_unpacked_sft_cache_packs_at_read_time_like_on_the_fly(tmp_path, tokenizer_dir, method):
    """A cache of tokenize_sft rows packed by from_cache(...).pack_examples equals packing on
    the fly: the same batches, fingerprint and counts (examples longer than a row are
    too_long, never an error), and states cross both ways."""
    pytest.importorskip("apache_beam")
    unpacked = Dataset.from_files(SFT_DATA).tokenize_sft(tokenizer_dir)
    cache = unpacked.cache(str(tmp_path / "sft-none"), row_group_rows=16)
    fly = lambda: unpacked.pack_examples(96, method=method, window=16).shuffle(16, seed=2).batch(4)  # noqa: E731
    cached = lambda: (  # noqa: E731
        Dataset.from_cache(cache.pipeline.root.origin.cache.directory)
        .pack_examples(96, method=method, window=16)
        .shuffle(16, seed=2)
        .batch(4)
    )
    check_equivalent(fly, cached, random_steps=6, seed=3)
    it = fly().iter()
    list(it)
    assert it.stats()["documents"]["skipped"]["too_long"] > 0


def test_eos_dedup_reads_only_the_trained_turn():
    from beamtok._src.transforms.sft import assemble_chat

    eos = 9
    # an untrained EOS right after the turn (a template's separator) does not count as the turn's own
    ids, mask = [1, 2, 3, eos, 4, 5], [0, 1, 1, 0, 0, 1]
    doc, truncated = assemble_chat(ids, mask, bos_id=None, eos_id=eos, max_length=None, truncation="drop")
    assert doc.ids.tolist() == [1, 2, 3, eos, eos, 4, 5, eos] and not truncated
    assert doc.mask.tolist() == [0, 1, 1, 1, 0, 0, 1, 1]
    # the assistant's own text ends with the EOS string (tokenized as EOS, trained): nothing is added
    ids, mask = [1, 2, eos, 4, 5, eos], [0, 1, 1, 0, 1, 1]
    doc, _ = assemble_chat(ids, mask, bos_id=None, eos_id=eos, max_length=None, truncation="drop")
    assert doc.ids.tolist() == ids and doc.mask.tolist() == mask
