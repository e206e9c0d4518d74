"""Per-shard tokenizing stages: plain text, prompt/completion (SFT) and chat records, and BOS/EOS
where documents lack them."""

from __future__ import annotations

from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.core.steps import BosEosStep, TokenizeStep
from beamtok._src.core.supervised_steps import ChatStep, SftStep
from beamtok._src.dataset.stage_adding import D, root_for_steps, tokenizer_ref, with_step
from beamtok._src.transforms.chat_render import json_kwargs
from beamtok._src.transforms.engine_option import engine_mode
from beamtok._src.transforms.sft import load_template_source
from beamtok._src.transforms.tokenize import Tokenizer
from beamtok._src.transforms.tokenizer_registry import load_tokenizer

__all__ = ["ensure_bos_eos", "tokenize", "tokenize_chat", "tokenize_sft"]


def tokenize(
    self: D,
    tokenizer: Any,
    *,
    field: str | None = None,
    add_special_tokens: bool = True,
    engine: str = "auto",
    backend: str | None = None,
) -> D:
    """Tokenize the text field with a fast tokenizer (a path, hub name or loaded tokenizer).

    ``engine="auto"`` encodes on the fastest exact engine that takes the file (each
    checked from the file, then on probe strings: ``Tokenizer.engine`` says which, and why
    the faster ones did not) and through Hugging Face ``tokenizers`` otherwise; ``"exact"``
    insists on an exact engine (refusing a file none takes), ``"tokenizers"`` never takes
    one. The tokens, and so the fingerprints and states, are the same whichever runs.

    Args:
        tokenizer: A tokenizer directory, a Hugging Face hub name kept on this machine, or a loaded
            tokenizer.
        field: The record field holding the text (default: the dataset's ``text_field``).
        add_special_tokens: Whether the tokenizer's post-processor adds its tokens (BOS, [CLS]...) as it
            does by default.
        engine: ``"auto"``, ``"exact"`` (an exact engine or a ConfigError) or ``"tokenizers"``
            (Hugging Face ``tokenizers`` only).
        backend: Deprecated name of ``engine`` (``"tiktoken"`` is ``"exact"``, ``"hf"`` is
            ``"tokenizers"``).
    Returns:
        A new Dataset with this step added (datasets are immutable).
    Raises:
        ConfigError: The tokenizer cannot be loaded, or ``engine="exact"`` and no exact engine takes
            it.
    """
    root_for_steps(self, "tokenize").origin.check_step("tokenize")
    tok = load_tokenizer(tokenizer)
    engine = engine_mode(engine, backend)
    step = TokenizeStep(tok.ref(), field or self.pipeline.root.spec.source.text_field, add_special_tokens, engine)
    if engine == "exact":
        tok.exact_encoder()  # refuse now a file no exact engine takes
    return with_step(self, step)


def tokenize_sft(
    self: D,
    tokenizer: Any,
    *,
    prompt: str = "prompt",
    completion: str = "completion",
    max_length: int | None = None,
    truncation: str = "completion_tail",
    bos: bool | None = None,
) -> D:
    """Tokenize prompt/completion records: ``[BOS] prompt completion EOS``, loss on the
    completion and EOS only (``labels`` -100 elsewhere). ``completion="completion"`` also
    accepts a ``generation`` field. Longer than ``max_length``: ``truncation`` cuts the
    completion's tail, the prompt's head, or drops the example (all counted).
    ``bos=None`` follows the tokenizer's own policy (GPT-2 adds none).

    Args:
        tokenizer: A tokenizer directory, kept hub name, or loaded tokenizer.
        prompt: The record field holding the prompt.
        completion: The record field holding the completion (``generation`` is accepted in its place).
        max_length: The longest example in tokens, or None for no limit.
        truncation: ``"completion_tail"``, ``"prompt_head"`` or ``"drop"``: what a longer example loses.
        bos: Whether to start each example with BOS; None follows the tokenizer's own post-processor.
    Returns:
        A new Dataset with this step added (datasets are immutable).
    """
    root_for_steps(self, "tokenize_sft").origin.check_step("tokenize_sft")
    tok = load_tokenizer(tokenizer)
    step = SftStep(tok.ref(), _bos_policy(tok, bos), max_length, truncation, prompt=prompt, completion=completion)
    return with_step(self, step)


def tokenize_chat(
    self: D,
    tokenizer: Any,
    *,
    template: str | None = None,
    messages: str = "messages",
    max_length: int | None = None,
    truncation: str = "completion_tail",
    bos: bool | None = None,
    eos: bool | None = None,
    template_kwargs: dict[str, Any] | None = None,
    date: str | None = None,
) -> D:
    """Tokenize chat records (``messages: [{role, content, ...}, ...]``), each conversation
    rendered once with a Jinja ``template`` (a file or a string; default: the tokenizer's
    chat template) and tokenized whole: the ids are those of ``transformers``'
    ``apply_chat_template(..., tokenize=True)`` with the same template and keyword
    arguments. The trained tokens are those the template marks with ``{% generation %}``
    (the mask equals ``transformers``' ``assistant_masks``); a template without markers
    trains each assistant message from the end of its generation prompt through its
    end-of-turn text (docs/fine-tuning.md shows both). Tool messages, tool calls and
    reasoning fields render as the template renders them.

    The template writes BOS and EOS, as it does at inference. ``bos=True`` puts BOS first
    where the text does not start with it; ``eos=True`` puts EOS after each assistant turn
    that does not already hold it (for a template that ends turns with a marker the
    tokenizer does not treat as EOS). Longer than ``max_length``: ``truncation`` cuts the
    end, the beginning, or drops the example (all counted).

    Args:
        tokenizer: A tokenizer directory, kept hub name, or loaded tokenizer.
        template: A Jinja chat template, as a file path or a string; None takes the tokenizer's own.
        messages: The record field holding the conversation (a list of messages).
        max_length: The longest example in tokens, or None for no limit.
        truncation: ``"completion_tail"``, ``"prompt_head"`` or ``"drop"``: what a longer example loses.
        bos: Put BOS first where the rendered text does not start with it.
        eos: Put EOS after each assistant turn that does not already end with it.
        template_kwargs: More variables for the template, as ``apply_chat_template`` takes them
            (``enable_thinking``, ``reasoning_effort``, ``tools``...); JSON values, part of the fingerprint.
        date: ``YYYY-MM-DD``, the day ``strftime_now`` gives templates that write today's date
            (gpt-oss, Llama 3.2); None: the day of rendering, as ``transformers`` does.
    Returns:
        A new Dataset with this step added (datasets are immutable).
    Raises:
        ConfigError: The template does not parse, the tokenizer has none and none is given, or
            ``template_kwargs`` is not JSON.
    """
    root_for_steps(self, "tokenize_chat").origin.check_step("tokenize_chat")
    tok = load_tokenizer(tokenizer)
    source = load_template_source(template, tok.chat_template, tok.name)
    step = ChatStep(
        tok.ref(),
        bool(bos),
        max_length,
        truncation,
        template=source,
        messages=messages,
        eos=bool(eos),
        template_kwargs=json_kwargs(template_kwargs),
        special_tokens=tok.special_tokens_map(),
        date=date,
    )
    step.renderer()  # fail now on a template that does not parse, or a bad date or keyword
    return with_step(self, step)


def ensure_bos_eos(self: D, *, bos: bool = True, eos: bool = True) -> D:
    """Add BOS/EOS where a document lacks them (GPT-2, whose BOS is its EOS, included).

    Args:
        bos: Add the tokenizer's BOS token where a document does not start with it.
        eos: Add the tokenizer's EOS token where a document does not end with it.
    Returns:
        A new Dataset with this step added (datasets are immutable).
    Raises:
        ConfigError: The tokenizer lacks the token asked for, or the records are SFT or chat examples.
    """
    if any(s.SUPERVISED for s in root_for_steps(self, "ensure_bos_eos").spec.steps):
        raise ConfigError("ensure_bos_eos(): tokenize_sft/tokenize_chat already place BOS and EOS")
    ref = tokenizer_ref(self, "ensure_bos_eos")
    if bos and ref.bos_id is None:
        raise ConfigError(f"tokenizer {ref.name!r} has no BOS token; call ensure_bos_eos(bos=False)")
    if eos and ref.eos_id is None:
        raise ConfigError(f"tokenizer {ref.name!r} has no EOS token; call ensure_bos_eos(eos=False)")
    return with_step(self, BosEosStep(ref.bos_id if bos else None, ref.eos_id if eos else None))


def _bos_policy(tok: Tokenizer, bos: bool | None) -> bool:
    """An explicit BOS choice, or the tokenizer's own policy."""
    return tok.adds_bos() if bos is None else bos
