"""Chat records token for token: ``tokenize_chat`` gives the ids of ``transformers``'
``apply_chat_template(..., tokenize=True)`` for the same template, and trains on exactly the
assistant turns (transformers' own ``{% generation %}`` mask is the oracle).

The templates are written as people ship them: one that ends assistant turns with
``{{ eos_token }}``, ChatML, a Llama-3-style header template with ``{{ bos_token }}``, an
``[INST]`` template, and one with a default system prompt. Each marks the text an assistant turn
adds with ``{% generation %}`` so transformers can say which tokens it trains on.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamtok import ConfigError, Dataset
from beamtok._src.core.step_table import step_from_json

from conftest import TOKENIZER_DIR

SPECIALS = [
    "<|im_start|>",
    "<|im_end|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "[INST]",
    "[/INST]",
]

TEMPLATES: dict[str, tuple[str, dict[str, str]]] = {
    # Zephyr style: every turn ends with the EOS token itself
    "eos_in_template": (
        "{% for message in messages %}"
        "{% if message['role'] == 'assistant' %}{{ '<|assistant|>\\n' }}{% generation %}{{ message['content'] + eos_token + '\\n' }}{% endgeneration %}"
        "{% else %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}{% endif %}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}",
        {},
    ),
    "chatml": (
        "{% for message in messages %}"
        "{% if message['role'] == 'assistant' %}{{ '<|im_start|>assistant\\n' }}{% generation %}{{ message['content'] + '<|im_end|>\\n' }}{% endgeneration %}"
        "{% else %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{% endif %}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
        {"eos_token": "<|im_end|>"},
    ),
    "llama3_headers": (
        "{{ bos_token }}"
        "{% for message in messages %}"
        "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
        "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] | trim + '<|eot_id|>' }}{% endgeneration %}"
        "{% else %}{{ message['content'] | trim + '<|eot_id|>' }}{% endif %}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    ),
    "inst": (
        "{{ bos_token }}"
        "{% for message in messages %}"
        "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
        "{% elif message['role'] == 'assistant' %}{% generation %}{{ message['content'] + eos_token }}{% endgeneration %}"
        "{% else %}{{ raise_exception('only user and assistant roles are supported') }}{% endif %}"
        "{% endfor %}",
        {"bos_token": "<|begin_of_text|>"},
    ),
    "system_prompt": (
        "{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] %}{% set messages = messages[1:] %}"
        "{% else %}{% set system = 'You are a helpful assistant.' %}{% endif %}"
        "{{ '<|im_start|>system\\n' + system + '<|im_end|>\\n' }}"
        "{% for message in messages %}"
        "{% if message['role'] == 'assistant' %}{{ '<|im_start|>assistant\\n' }}{% generation %}{{ message['content'] + '<|im_end|>\\n' }}{% endgeneration %}"
        "{% else %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{% endif %}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
        {"eos_token": "<|im_end|>"},
    ),
}


@cache
def chat_tokenizer(name: str, root: str) -> str:
    """GPT-2 with the template's control tokens added and its template and special tokens in
    tokenizer_config.json, saved as ``transformers`` saves a chat model's tokenizer."""
    from transformers import AutoTokenizer

    template, special = TEMPLATES[name]
    hf = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    hf.add_special_tokens({"additional_special_tokens": SPECIALS})
    for key, token in special.items():
        setattr(hf, key, token)
    hf.chat_template = template
    directory = Path(root) / name
    hf.save_pretrained(str(directory))
    return str(directory)


@pytest.fixture(scope="module")
def tokenizers_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("chat-tokenizers"))


def transformers_reference(directory: str, messages: list[dict[str, str]]) -> tuple[list[int], list[int]]:
    """The ids and assistant mask ``apply_chat_template`` gives."""
    from transformers import AutoTokenizer

    hf = _loaded(directory, AutoTokenizer)
    out = hf.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    return list(out["input_ids"]), list(out["assistant_masks"])


@cache
def _loaded(directory: str, auto: Any) -> Any:
    return auto.from_pretrained(directory)


def beamtok_example(directory: str, messages: list[dict[str, str]], **options: Any) -> dict[str, np.ndarray]:
    (example,) = list(Dataset.from_sequence([{"messages": messages}]).tokenize_chat(directory, **options))
    return example


CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}, {"role": "assistant", "content": "Paris."}],
    [
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke about  spaces\nand lines."},
        {"role": "assistant", "content": "Why did the newline break up?\n\nIt needed space."},
    ],
]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
@pytest.mark.parametrize("conversation", range(len(CONVERSATIONS)))
def test_ids_and_mask_equal_apply_chat_template(tokenizers_dir, name, conversation):
    directory = chat_tokenizer(name, tokenizers_dir)
    messages = CONVERSATIONS[conversation]
    want_ids, want_mask = transformers_reference(directory, messages)
    example = beamtok_example(directory, messages)
    assert example["input_ids"].tolist() == want_ids
    assert example["loss_mask"].tolist() == want_mask
    assert (example["labels"] != -100).astype(int).tolist() == want_mask


def test_a_template_that_writes_eos_gets_no_second_one(tokenizers_dir):
    directory = chat_tokenizer("eos_in_template", tokenizers_dir)
    messages = CONVERSATIONS[1]
    example = beamtok_example(directory, messages)
    eos = 50256
    assert int((example["input_ids"] == eos).sum()) == 4  # one per turn, as the template writes it
    assert (
        int((example["input_ids"][example["loss_mask"] == 1] == eos).sum()) == 2
    )  # those of the assistant turns trained
    # asking for EOS after each turn adds none where the turn holds it already
    assert beamtok_example(directory, messages, eos=True)["input_ids"].tolist() == example["input_ids"].tolist()


def test_eos_and_bos_when_asked_for_a_template_without_them(tokenizers_dir):
    directory = chat_tokenizer("chatml", tokenizers_dir)  # ends turns with <|im_end|>, here the EOS token
    plain = chat_tokenizer("inst", tokenizers_dir)  # writes {{ bos_token }} itself
    messages = CONVERSATIONS[0]
    example = beamtok_example(directory, messages, eos=True)
    assert (
        example["input_ids"].tolist() == transformers_reference(directory, messages)[0]
    )  # <|im_end|> is its EOS: nothing added
    want_ids, _ = transformers_reference(plain, messages)
    with_bos = beamtok_example(plain, messages, bos=True)
    assert with_bos["input_ids"].tolist() == want_ids  # the template's BOS is kept, not doubled
    from beamtok import load_tokenizer

    gpt2 = load_tokenizer(str(TOKENIZER_DIR))
    template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    example = beamtok_example(str(TOKENIZER_DIR), messages, template=template, eos=True)
    trained = example["input_ids"][example["loss_mask"] == 1]
    assert trained[-1] == gpt2.eos_id and int((example["input_ids"] == gpt2.eos_id).sum()) == 1
    # no generation prompt and no end-of-turn token: the message's own text is trained (the token
    # holding the space before it straddles its edge, so it is trained too), then the EOS asked for
    assert gpt2.decode(trained) == " Paris.<|endoftext|>"


def test_a_token_merged_across_a_turns_edge_is_trained(tokenizers_dir):
    """A generation prompt ``Assistant: `` then ``Hello``: the whole text tokenizes `` Hello`` as one token across
    the edge; it is trained (it holds the turn's first character), the ids are the whole text's."""
    template = "{% for m in messages %}{% if m['role'] == 'assistant' %}Assistant: {% generation %}{{ m['content'] }}\n{% endgeneration %}{% else %}User: {{ m['content'] }}\n{% endif %}{% endfor %}{% if add_generation_prompt %}Assistant: {% endif %}"
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello there"}]
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    want = hf.apply_chat_template(
        messages, chat_template=template, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    example = beamtok_example(str(TOKENIZER_DIR), messages, template=template)
    assert example["input_ids"].tolist() == list(want["input_ids"])
    assert example["loss_mask"].tolist() == list(want["assistant_masks"])
    assert hf.decode(example["input_ids"][example["loss_mask"] == 1]) == " Hello there\n"


def test_a_step_made_before_whole_conversation_tokenizing_is_refused(tokenizers_dir):
    ds = Dataset.from_sequence([{"messages": CONVERSATIONS[0]}]).tokenize_chat(chat_tokenizer("chatml", tokenizers_dir))
    (step,) = [s for s in ds.spec.steps if s.OP == "tokenize_chat"]
    old = step.to_json()
    del old["eos"]
    with pytest.raises(ConfigError, match="tokenized chat turns apart"):
        step_from_json(old)
    assert step_from_json(step.to_json()) == step


TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)


@st.composite
def conversations(draw: Any) -> list[dict[str, str]]:
    messages = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(TEXT)})
    for _ in range(draw(st.integers(1, 3))):
        messages.append({"role": "user", "content": draw(TEXT)})
        messages.append({"role": "assistant", "content": draw(TEXT)})
    return messages


@pytest.mark.parametrize("name", ["chatml", "llama3_headers", "system_prompt", "eos_in_template"])
def test_hypothesis_conversations_token_for_token(tokenizers_dir, name):
    directory = chat_tokenizer(name, tokenizers_dir)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
    @given(conversations())
    def check(messages: list[dict[str, str]]) -> None:
        want_ids, want_mask = transformers_reference(directory, messages)
        example = beamtok_example(directory, messages)
        assert example["input_ids"].tolist() == want_ids, json.dumps(messages)
        clean_edges = all(m["content"] == m["content"].strip() for m in messages if m["role"] == "assistant")
        if clean_edges:  # transformers' mask from trimmed offsets is its own at whitespace edges
            assert example["loss_mask"].tolist() == want_mask, json.dumps(messages)

    check()
