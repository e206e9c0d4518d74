"""Every text chat template TRL ships (its ``chat_templates/`` folder, installed by the dev
extra), rendered by ``tokenize_chat`` on multi-turn conversations with and without system
prompts, reasoning and tool calls, on the fly and from a cache (the files a build writes; three
templates through ``beamtok cache --records chat`` itself): the ids equal
``apply_chat_template(tokenize=True)``; with
each ``*_training.jinja`` twin the loss mask equals ``transformers``' ``assistant_masks``; with a
template without markers, every assistant message's text is trained and no user text is."""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from beamtok import Dataset

from conftest import TOKENIZER_DIR, cache_without_beam, write_jsonl

pytest.importorskip("transformers")
SPEC = importlib.util.find_spec("trl")
if SPEC is None or not SPEC.submodule_search_locations:
    pytest.skip("trl is not installed (make setup installs it with the dev extra)", allow_module_level=True)
FOLDER = Path(next(iter(SPEC.submodule_search_locations))) / "chat_templates"
TEMPLATES = sorted(FOLDER.glob("*.jinja"))
IMAGE_MODELS = ("idefics3", "llava_next", "smolvlm", "_vl")  # image templates: their content is a list of parts
TEXT_TEMPLATES = [p for p in TEMPLATES if not any(m in p.stem for m in IMAGE_MODELS)]
BOS, EOS = "<|begin_of_text|>", "<|endoftext|>"
LITERAL_TOKENS = ["<start_of_turn>", "<end_of_turn>", "[INST]", "[/INST]", "<think>", "</think>", "<tool_call>",
                  "</tool_call>", "<tool_response>", "</tool_response>", "<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>"]  # fmt: skip

SYSTEM = {"role": "system", "content": "You are a careful assistant. Answer briefly."}
CONVERSATIONS: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": "What is the capital of France?"}, {"role": "assistant", "content": "Paris."}],
    [
        SYSTEM,
        {"role": "user", "content": "Name two rivers of England."},
        {"role": "assistant", "content": "The Thames and the Severn.\n\nBoth reach the sea in the west and east."},
        {"role": "user", "content": "Which is longer?"},
        {"role": "assistant", "content": "The Severn, by about 8 miles."},
    ],
    [
        {"role": "user", "content": "Add 17 and 25."},
        {"role": "assistant", "reasoning_content": "17 + 25: 7 + 5 = 12, carry 1; 1 + 2 + 1 = 4.", "content": "42"},
        {"role": "user", "content": "And  doubled?\nShow the sum."},
        {"role": "assistant", "reasoning_content": "42 * 2 = 84.", "content": "84, that is 42 + 42."},
    ],
    [
        SYSTEM,
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "name": "get_weather", "content": "18 degrees, light rain"},
        {"role": "assistant", "content": "It is 18 degrees with light rain in Paris."},
    ],
]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]  # fmt: skip


@cache
def tokenizer_dir(root: str) -> str:
    """GPT-2 with every control token of TRL's templates added, saved as transformers saves it."""
    from transformers import AutoTokenizer

    found = set(LITERAL_TOKENS)
    for path in TEMPLATES:
        found |= set(re.findall(r"<\|[A-Za-z_./=0-9 -]{1,40}\|>|<｜[^｜]{1,40}｜>", path.read_text()))
    hf = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    hf.add_special_tokens({"additional_special_tokens": sorted(found - {EOS})})
    hf.bos_token = BOS
    directory = Path(root) / "trl-tokens"
    hf.save_pretrained(str(directory))
    return str(directory)


@pytest.fixture(scope="module")
def directory(tmp_path_factory) -> str:
    return tokenizer_dir(str(tmp_path_factory.mktemp("trl")))


@cache
def hf_tokenizer(directory: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory)


def reference(directory: str, source: str, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> Any:
    """transformers' ids and assistant mask, or None where it cannot render the conversation."""
    tagged = re.search(r"\{%-?\s*generation\s*-?%\}", source) is not None
    try:
        out = hf_tokenizer(directory).apply_chat_template(
            messages,
            chat_template=source,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=tagged,
            **kwargs,
        )
    except Exception:
        return None
    return list(out["input_ids"]), list(out["assistant_masks"]) if tagged else None


def kwargs_of(name: str) -> list[dict[str, Any]]:
    """Each template's keyword arguments to try: none, and the ones its family reads."""
    extra: list[dict[str, Any]] = [{}]
    if name.startswith("qwen3") or name.startswith("nemotron"):
        extra.append({"enable_thinking": False})
    if name.startswith("gptoss"):
        extra.append({"reasoning_effort": "high"})
    extra.append({"tools": TOOLS})
    return extra


@pytest.mark.parametrize("path", TEXT_TEMPLATES, ids=[p.stem for p in TEXT_TEMPLATES])
def test_every_trl_template_gives_apply_chat_templates_ids_and_masks(directory, path, tmp_path):
    source = path.read_text()
    compared = 0
    kwargs_seen: list[dict[str, Any]] = []
    for kwargs in kwargs_of(path.stem):
        cases = [(m, reference(directory, source, m, kwargs)) for m in CONVERSATIONS]
        cases = [(m, want) for m, want in cases if want is not None]
        if not cases:
            continue
        records = write_jsonl(tmp_path / f"chat-{len(kwargs_seen)}.jsonl", [{"messages": m} for m, _ in cases])
        ds = Dataset.from_files(str(records)).tokenize_chat(directory, template=source, template_kwargs=kwargs)
        got = list(ds)
        assert len(got) == len(cases), f"{path.stem} {kwargs}: beamtok skipped a conversation transformers renders"
        cached = list(cache_without_beam(ds, str(tmp_path / f"cache-{len(kwargs_seen)}")))  # the files a build writes
        kwargs_seen.append(kwargs)
        assert [c["input_ids"].tolist() for c in cached] == [g["input_ids"].tolist() for g in got]
        assert [c["loss_mask"].tolist() for c in cached] == [g["loss_mask"].tolist() for g in got]
        for (messages, (ids, mask)), example in zip(cases, got):
            assert example["input_ids"].tolist() == ids, f"{path.stem} {kwargs}: ids differ"
            if mask is not None:
                assert example["loss_mask"].tolist() == mask, f"{path.stem} {kwargs}: mask differs"
            else:
                trained = hf_tokenizer(directory).decode(example["input_ids"][example["loss_mask"] == 1])
                last = [m for m in messages if m["role"] == "assistant"][-1]["content"]
                assert last.strip() in trained, f"{path.stem} {kwargs}: the last answer is not trained"
                for m in messages:
                    if m["role"] == "user":
                        assert m["content"].strip() not in trained, f"{path.stem} {kwargs}: user text trained"
            compared += 1
    assert compared >= 2, f"{path.stem}: transformers rendered fewer than 2 of the conversations"


@pytest.mark.slow  # Beam builds: make test-fast leaves them out
@pytest.mark.parametrize(
    ("name", "kwargs"),
    [("qwen3", {"enable_thinking": False}), ("gptoss_training", {"reasoning_effort": "high"}), ("llama3", {})],
)
def test_a_chat_cache_built_by_the_cli_equals_the_stream(directory, tmp_path, name, kwargs):
    import json

    pytest.importorskip("apache_beam")
    from click.testing import CliRunner

    from beamtok._src.cli.app import main

    template = FOLDER / f"{name}.jinja"
    records = tmp_path / "chat.jsonl"
    records.write_text("".join(json.dumps({"messages": m}) + "\n" for m in CONVERSATIONS[:3]))
    out = tmp_path / "cache"
    arguments = ["cache", str(records), "--records", "chat", "--tokenizer", directory, "--chat-template", str(template)]
    arguments += ["--template-kwargs", json.dumps(kwargs), "--chat-date", "2026-12-07", "--seq-len", "1024"]
    result = CliRunner().invoke(main, [*arguments, "--output", str(out), "-q"])
    assert result.exit_code == 0, result.output
    stream = (
        Dataset.from_files(str(records))
        .tokenize_chat(directory, template=str(template), template_kwargs=kwargs, date="2026-12-07")
        .pack_examples(1024)
    )
    cached, streamed = list(Dataset.from_cache(str(out))), list(stream)
    assert len(cached) == len(streamed) > 0
    for a, b in zip(cached, streamed):
        assert a["input_ids"].tolist() == b["input_ids"].tolist() and a["loss_mask"].tolist() == b["loss_mask"].tolist()
    assert Dataset.from_cache(str(out)).spec.fingerprint == stream.spec.fingerprint  # kwargs and date are in it


def test_template_kwargs_enter_the_fingerprint(directory):
    template = str(FOLDER / "qwen3.jinja")
    plain = Dataset.from_sequence([]).tokenize_chat(directory, template=template)
    thinking_off = Dataset.from_sequence([]).tokenize_chat(
        directory, template=template, template_kwargs={"enable_thinking": False}
    )
    dated = Dataset.from_sequence([]).tokenize_chat(directory, template=template, date="2026-12-07")
    assert len({plain.spec.fingerprint, thinking_off.spec.fingerprint, dated.spec.fingerprint}) == 3


def test_offsets_from_bytes_are_the_offsets_tokenizers_gives(directory):
    import numpy as np

    from beamtok import load_tokenizer
    from beamtok._src.transforms.chat_masks import byte_lengths, offsets_from_bytes
    from beamtok._src.transforms.chat_spans import mask_from_spans

    from conftest import real_paragraphs

    tok = load_tokenizer(directory)
    lengths = byte_lengths(tok)
    assert lengths is not None  # GPT-2's byte-level vocabulary
    texts = [
        *real_paragraphs(30),
        "<|im_start|>user\nnaïve café 😀🇫🇷 漢字  \n\n<|im_end|>\n",
        "a\u00a0b\r\n\t<think>x</think>",
    ]
    for text in texts:
        encoding = tok.backend.encode(text, add_special_tokens=False)
        offsets = offsets_from_bytes(lengths, text, np.asarray(encoding.ids))
        assert offsets is not None and offsets.tolist() == [list(o) for o in encoding.offsets], text[:40]
        spans = [(3, 9), (20, 21), (len(text) - 5, len(text))]
        assert mask_from_spans(offsets, spans).tolist() == mask_from_spans(encoding.offsets, spans).tolist()
    assert offsets_from_bytes(lengths, "abc", np.asarray(tok.backend.encode("abd").ids)[:1]) is None  # bytes short
