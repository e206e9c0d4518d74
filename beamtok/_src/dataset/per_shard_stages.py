"""The per-shard stages of the fluent Dataset: reading documents (map, filter), tokenizing
(plain, SFT, chat), BOS/EOS, length filters, and packing. Each adds one step (or the packing)
to the spec of the dataset's shard root: what the Beam cache pipeline runs too. They come
before any stream stage; a root that has no single spec (a mix) refuses them by name.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.validate import check_choice
from beamtok._src.core.spec import PackSpec, callable_name
from beamtok._src.core.steps import BosEosStep, FilterStep, LengthFilterStep, MapStep, Step, TokenizeStep
from beamtok._src.core.supervised_steps import ChatStep, SftStep
from beamtok._src.stream.pipeline import Pipeline
from beamtok._src.stream.roots.shards import ShardsRoot, shard_root
from beamtok._src.transforms.chat_render import json_kwargs
from beamtok._src.transforms.engine_option import engine_mode
from beamtok._src.transforms.packing_modes import (
    BestFit,
    ConcatChunk,
    FirstFit,
    Greedy,
    PackingMode,
    Pad,
    PowerOfTwo,
    Window,
)
from beamtok._src.transforms.sft import load_template_source
from beamtok._src.transforms.tokenize import Tokenizer, TokenizerRef, load_tokenizer

__all__ = ["PerShardStages"]

D = TypeVar("D", bound="PerShardStages")


class PerShardStages:
    """The per-shard stage methods of ``Dataset`` (which holds ``_pipeline``)."""

    _pipeline: Pipeline

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    def _with_root(self: D, root: ShardsRoot) -> D:
        return type(self)(dataclasses.replace(self._pipeline, root=root))

    def map(self: D, fn: Callable[[dict[str, Any]], dict[str, Any]], *, name: str | None = None) -> D:
        """Transform each document record (before or after tokenize).

        Args:
            fn: Called with each document record (a dict); returns the record to keep in its place.
            name: The step's name in fingerprints and states (default: the function's qualified name); give
                one for a lambda.
        Returns:
            A new Dataset with this step added (datasets are immutable).
        """
        return self._add_step(MapStep(name or callable_name(fn), fn))

    def filter(self: D, fn: Callable[[dict[str, Any]], bool], *, name: str | None = None) -> D:
        """Keep documents for which ``fn(record)`` is true; others count as ``filtered``.

        Args:
            fn: Called with each document record; a false result skips it (counted as ``filtered``).
            name: The step's name in fingerprints and states (default: the function's qualified name).
        Returns:
            A new Dataset with this step added (datasets are immutable).
        """
        return self._add_step(FilterStep(name or callable_name(fn), fn))

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
        self._root_for_steps("tokenize").origin.check_step("tokenize")
        tok = load_tokenizer(tokenizer)
        engine = engine_mode(engine, backend)
        step = TokenizeStep(tok.ref(), field or self._pipeline.root.spec.source.text_field, add_special_tokens, engine)
        if engine == "exact":
            tok.exact_encoder()  # refuse now a file no exact engine takes
        return self._add_step(step)

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
        self._root_for_steps("tokenize_sft").origin.check_step("tokenize_sft")
        tok = load_tokenizer(tokenizer)
        step = SftStep(tok.ref(), _bos_policy(tok, bos), max_length, truncation, prompt=prompt, completion=completion)
        return self._add_step(step)

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
        self._root_for_steps("tokenize_chat").origin.check_step("tokenize_chat")
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
        return self._add_step(step)

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
        if any(s.SUPERVISED for s in self._root_for_steps("ensure_bos_eos").spec.steps):
            raise ConfigError("ensure_bos_eos(): tokenize_sft/tokenize_chat already place BOS and EOS")
        ref = self._tokenizer_ref("ensure_bos_eos")
        if bos and ref.bos_id is None:
            raise ConfigError(f"tokenizer {ref.name!r} has no BOS token; call ensure_bos_eos(bos=False)")
        if eos and ref.eos_id is None:
            raise ConfigError(f"tokenizer {ref.name!r} has no EOS token; call ensure_bos_eos(eos=False)")
        return self._add_step(BosEosStep(ref.bos_id if bos else None, ref.eos_id if eos else None))

    def filter_length(self: D, *, min_tokens: int | None = None, max_tokens: int | None = None) -> D:
        """Skip documents shorter or longer than these token counts (counted as too_short/too_long).

        Args:
            min_tokens: Skip documents with fewer tokens (counted as ``too_short``); None: no floor.
            max_tokens: Skip documents with more tokens (counted as ``too_long``); None: no ceiling.
        Returns:
            A new Dataset with this step added (datasets are immutable).
        """
        return self._add_step(LengthFilterStep(min_tokens, max_tokens))

    def concat_chunk(self: D, seq_len: int, *, remainder: str = "pad") -> D:
        """Concatenate documents and cut rows of ``seq_len`` tokens, with segment/position ids.

        ``remainder`` says what happens to a shard's last partial row: ``pad`` it, ``drop`` it
        (its tokens are counted as dropped) or ``keep`` it shorter.

        Args:
            seq_len: The tokens of each row.
            remainder: ``"pad"``, ``"drop"`` or ``"keep"``: what becomes of a shard's last partial row.
        Returns:
            A new Dataset packed this way (a dataset has one packing).
        """
        return self._set_pack(ConcatChunk, seq_len, remainder=remainder)

    def pad(self: D, seq_len: int) -> D:
        """One document (or SFT example) a row, truncated (counted) and padded to ``seq_len``.

        Args:
            seq_len: The tokens of each row: longer documents are truncated, shorter ones padded.
        Returns:
            A new Dataset packed this way (a dataset has one packing).
        """
        return self._set_pack(Pad, seq_len)

    def pack_examples(self: D, seq_len: int, *, method: str = "greedy", window: int = 64) -> D:
        """Pack whole examples into padded rows of ``seq_len``, never splitting one.

        ``greedy`` fills rows in order; ``first_fit`` packs each window of ``window`` examples
        first-fit-decreasing, wasting less padding. Segment and position ids restart per
        example; examples longer than ``seq_len`` are skipped and counted as ``too_long``
        (set ``max_length`` on tokenize_sft/tokenize_chat to truncate them instead). The same
        holds when packing an unpacked cache at read time.

        Args:
            seq_len: The tokens of each row.
            method: ``"greedy"`` (in order) or ``"first_fit"`` (first-fit decreasing over a window).
            window: The examples ``first_fit`` packs at a time.
        Returns:
            A new Dataset packed this way (a dataset has one packing).
        """
        check_choice(method, "method", ("greedy", "first_fit"))
        mode = FirstFit if method == "first_fit" else Greedy
        if not any(step.SUPERVISED for step in self._root_for_steps(mode.API).spec.steps):
            warnings.warn(
                "pack_examples() packs whole examples and skips every document longer than seq_len (counted as "
                "too_long); pretraining documents are mostly longer: concat_chunk(seq_len) packs them without loss",
                UserWarning,
                stacklevel=2,
            )
        return self._set_pack(mode, seq_len, window=window if mode is FirstFit else None)

    def pack_documents(
        self: D,
        seq_len: int,
        *,
        method: str = "best_fit",
        window: int = 256,
        long_docs: str = "split",
        bos: bool = False,
    ) -> D:
        """Pack whole documents into padded rows of ``seq_len``, best-fit decreasing over
        windows of ``window`` documents: fewer documents cut across rows than ``concat_chunk``,
        for some padding (``stats()["padding_waste"]``).

        A document longer than ``seq_len`` is split into ``seq_len`` pieces, each packed as a
        document of its own (``long_docs="split"``), or keeps its first ``seq_len`` tokens
        (``"truncate"``; the rest count as ``truncated_tokens``). ``bos=True`` starts every
        row with the tokenizer's BOS token: pieces that lack it get it prepended. A larger
        window wastes less padding and re-reads more documents when a resume lands in it.

        Args:
            seq_len: The tokens of each row.
            method: ``"best_fit"``, the one method (best-fit decreasing over a window).
            window: The documents packed at a time.
            long_docs: ``"split"`` a longer document into pieces, or ``"truncate"`` it.
            bos: Start every row with the tokenizer's BOS token.
        Returns:
            A new Dataset packed this way (a dataset has one packing).
        """
        check_choice(method, "method", ("best_fit",))
        check_choice(long_docs, "long_docs", ("split", "truncate"))
        bos_id = None
        if bos:
            ref = self._tokenizer_ref(BestFit.API)
            if ref.bos_id is None:
                raise ConfigError(f"tokenizer {ref.name!r} has no BOS token; call pack_documents(bos=False)")
            bos_id = ref.bos_id
        return self._set_pack(BestFit, seq_len, window=window, long_docs=long_docs, bos_id=bos_id)

    def pack_power_of_two(self: D, max_len: int, *, min_len: int = 64) -> D:
        """Cut each document into unpadded rows of power-of-two lengths: ``max_len`` rows
        while the document lasts, then the binary form of the rest down to ``min_len`` (fewer
        tokens left over count as ``truncated_tokens``). No row crosses a document; batch them
        with ``batch_tokens(max_tokens)`` for variable sequence length training.

        Args:
            max_len: The longest row (a power of two).
            min_len: The shortest row (a power of two); shorter leftovers are counted as truncated.
        Returns:
            A new Dataset packed this way (a dataset has one packing).
        """
        return self._set_pack(PowerOfTwo, max_len, window=min_len)

    def sliding_window(self: D, seq_len: int, *, stride: int | None = None) -> D:
        """Windows of ``seq_len`` tokens every ``stride`` tokens (default: no overlap).

        Overlapped tokens are masked out of the loss in every window but a document's first.

        Args:
            seq_len: The tokens of each window.
            stride: Tokens between window starts; None: ``seq_len`` (no overlap).
        Returns:
            A new Dataset packed this way (a dataset has one packing).
        """
        return self._set_pack(Window, seq_len, stride=stride if stride is not None else seq_len)

    # -------------------------------------------------------------- helpers

    def _root_for_steps(self, name: str) -> ShardsRoot:
        """The shard root a per-shard stage ``name`` changes, refusing it after stream stages."""
        root = shard_root(self._pipeline.root, f"{name}()")
        if self._pipeline.stages:
            raise ConfigError(f"{name}() is a per-shard stage; call it before shuffle/batch/take/enumerate")
        return root

    def _add_step(self: D, step: Step) -> D:
        name = step.OP
        root = self._root_for_steps(name)
        root.origin.check_step(name)
        if root.spec.pack is not None:
            raise ConfigError(f"{name}() works on documents; call it before the packing stage")
        if step.TOKENIZES and root.spec.tokenized:
            done = next(s.OP for s in root.spec.steps if s.TOKENIZES)
            raise ConfigError(f"{name}(): the documents are already tokenized by {done}(); tokenize once")
        return self._with_root(root.with_spec(dataclasses.replace(root.spec, steps=(*root.spec.steps, step))))

    def _set_pack(self: D, mode: type[PackingMode], seq_len: int, **kwargs: Any) -> D:
        name = mode.API
        root = self._root_for_steps(name)
        root.origin.check_pack(name)
        if root.spec.pack is not None:
            raise ConfigError(f"{name}(): the dataset is already packed ({root.spec.pack.mode})")
        ref = self._tokenizer_ref(name)
        pack = PackSpec(mode.NAME, seq_len, ref.pad_id, **kwargs)  # type: ignore[arg-type]
        return self._with_root(root.with_spec(dataclasses.replace(root.spec, pack=pack)))

    def _tokenizer_ref(self, name: str) -> TokenizerRef:
        ref = self._root_for_steps(name).spec.tokenizer
        if ref is None:
            raise ConfigError(f"{name}() needs tokens: call tokenize() before it")
        return ref


def _bos_policy(tok: Tokenizer, bos: bool | None) -> bool:
    """An explicit BOS choice, or the tokenizer's own policy."""
    return tok.adds_bos() if bos is None else bos
