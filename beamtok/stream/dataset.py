"""The fluent Dataset: per-shard stages first, stream stages after, then ``iter()``.

    ds = (Dataset.from_files("data/corpus/shakespeare-{00..03}.jsonl")
          .tokenize("data/tokenizers/gpt2")
          .ensure_bos_eos()
          .concat_chunk(1024)
          .shuffle(window=64, seed=0)
          .batch(8))
    it = ds.iter()
    batch = next(it)
    state = it.state_dict()            # JSON; resume with ds.iter(state_dict=state)

A Dataset is immutable: every method returns a new one. Per-shard stages (map, filter,
tokenize, ensure_bos_eos, filter_length, packing) make up the Spec that the Beam pipeline
runs too; stream stages (shuffle, batch, take, enumerate) run after it in both modes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from beamtok.cache.reader import Cache
from beamtok.errors import ConfigError
from beamtok.shard import ShardProcessor
from beamtok.sources.urls import Shard, expand_urls
from beamtok.spec import (
    TRUNCATION_POLICIES,
    BosEosStep,
    ChatStep,
    FilterStep,
    LengthFilterStep,
    MapStep,
    PackSpec,
    SftStep,
    SourceSpec,
    Spec,
    Step,
    TokenizeStep,
    callable_name,
    fingerprint_of,
)
from beamtok.stream.iterator import DatasetIterator
from beamtok.stream.parallel import ParallelShards, default_workers
from beamtok.stream.plan import (
    BatchConfig,
    EnumerateConfig,
    ShuffleConfig,
    SourceOptions,
    StageConfig,
    TakeConfig,
    build_stream,
)
from beamtok.stream.source import ReaderSplit, ShardOpener, ShardSource
from beamtok.stream.stages import Node
from beamtok.transforms.sft import ChatTemplate, load_template_source
from beamtok.transforms.tokenize import load_tokenizer

__all__ = ["Dataset"]


@dataclass(frozen=True)
class _CacheSource:
    """A cache the dataset reads instead of running the per-shard step, optionally repacked."""

    cache: Cache = dataclasses.field(compare=False)
    repack: PackSpec | None = None


@dataclass(frozen=True)
class _Plan:
    shards: tuple[Shard, ...]
    source: SourceSpec
    steps: tuple[Step, ...] = ()
    pack: PackSpec | None = None
    on_error: str = "raise"
    stages: tuple[StageConfig, ...] = ()
    options: SourceOptions = dataclasses.field(default_factory=SourceOptions)
    cached: _CacheSource | None = None


class Dataset:
    """A checkpointable stream of examples, built step by step."""

    def __init__(self, plan: _Plan) -> None:
        self._plan = plan

    # ----------------------------------------------------------------- sources

    @classmethod
    def from_files(
        cls,
        urls: str | Sequence[str],
        *,
        format: str = "auto",
        text_field: str = "text",
        columns: Sequence[str] | None = None,
        on_error: str = "raise",
    ) -> Dataset:
        """Read files: JSONL (optionally .gz/.zst), Parquet or plain text, local or remote.

        ``urls`` may use brace patterns (``train.{00..31}.jsonl.gz``) and local globs; each
        file is one shard, numbered in the expanded order.
        """
        shards = tuple(Shard(i, url) for i, url in enumerate(expand_urls(urls)))
        source = SourceSpec(format, text_field, tuple(columns) if columns is not None else None)
        return cls(_Plan(shards, source, on_error=_check_on_error(on_error)))

    @classmethod
    def from_sequence(
        cls, data: Sequence[Any] | Sequence[Sequence[Any]], *, text_field: str = "text", shards: int = 1, on_error: str = "raise"
    ) -> Dataset:
        """Read an in-memory sequence of strings or dicts (a list, a ``datasets.Dataset``...).

        ``shards`` > 1 splits it into that many contiguous shards.
        """
        parts = _split_sequence(data, shards)
        shard_list = tuple(Shard(i, f"memory://sequence/{i}", part) for i, part in enumerate(parts))
        return cls(_Plan(shard_list, SourceSpec("memory", text_field), on_error=_check_on_error(on_error)))

    @classmethod
    def from_iterable(
        cls, source: Iterable[Any] | Callable[[], Iterable[Any]], *, text_field: str = "text", on_error: str = "raise"
    ) -> Dataset:
        """Read a re-iterable object, or a function returning a fresh iterable, as one shard.

        Resuming skips the items before the cursor, so a one-shot iterator (a generator) is
        refused: pass a function that creates it instead.
        """
        if callable(source) and not isinstance(source, Iterable):
            factory: Callable[[], Iterable[Any]] = source
        elif isinstance(source, Iterator):
            raise ConfigError("from_iterable needs a re-iterable object or a function returning an iterable, not a one-shot iterator")
        elif isinstance(source, Iterable):
            obj = source

            def factory() -> Iterable[Any]:
                return iter(obj)
        else:
            raise ConfigError(f"from_iterable needs an iterable, got {type(source).__name__}")
        shard = Shard(0, "memory://iterable/0", factory)
        return cls(_Plan((shard,), SourceSpec("memory", text_field), on_error=_check_on_error(on_error)))

    @classmethod
    def from_cache(cls, directory: str, *, fingerprint: str | None = None) -> Dataset:
        """Reopen a cache built by ``beamtok cache`` or :meth:`cache` as a dataset.

        It yields the examples the on-the-fly pipeline of the same spec yields, with the same
        cursors, so states cross between the two. Pass ``fingerprint`` to insist on a spec.
        A cache built without packing can be packed here with ``.concat_chunk(n)`` etc.
        """
        cache = Cache(directory, fingerprint=fingerprint)
        spec = cache.manifest.spec
        source = SourceSpec(spec["source"]["format"], spec["source"]["text_field"])
        plan = _Plan(tuple(cache.shards), source, on_error=spec["on_error"], cached=_CacheSource(cache))
        return cls(plan)

    @classmethod
    def from_hf(cls, dataset: Any, *, text_field: str = "text", shards: int = 1, on_error: str = "raise") -> Dataset:
        """Read a Hugging Face ``datasets.Dataset`` (map-style), in column slices."""
        return cls.from_sequence(dataset, text_field=text_field, shards=shards, on_error=on_error)

    # ------------------------------------------------------- per-shard stages

    def map(self, fn: Callable[[dict[str, Any]], dict[str, Any]], *, name: str | None = None) -> Dataset:
        """Transform each document record (before or after tokenize)."""
        return self._add_step(MapStep(fn, name or callable_name(fn)), "map")

    def filter(self, fn: Callable[[dict[str, Any]], bool], *, name: str | None = None) -> Dataset:
        """Keep documents for which ``fn(record)`` is true; others count as ``filtered``."""
        return self._add_step(FilterStep(fn, name or callable_name(fn)), "filter")

    def tokenize(self, tokenizer: Any, *, field: str | None = None, add_special_tokens: bool = True, backend: str = "hf") -> Dataset:
        """Tokenize the text field with a fast tokenizer (a path, hub name or loaded tokenizer).

        ``backend="tiktoken"`` encodes through tiktoken, several times faster, for byte-level
        BPE tokenizers it reproduces exactly (GPT-2 and the like); others are refused.
        """
        tok = load_tokenizer(tokenizer)
        if backend not in ("hf", "tiktoken"):
            raise ConfigError(f"backend must be 'hf' or 'tiktoken', got {backend!r}")
        if backend == "tiktoken":
            tok.tiktoken()  # refuse now a tokenizer tiktoken cannot reproduce
        step = TokenizeStep(tok.ref(), field or self._plan.source.text_field, add_special_tokens, backend)
        return self._add_step(step, "tokenize")

    def tokenize_sft(
        self,
        tokenizer: Any,
        *,
        prompt: str = "prompt",
        completion: str = "completion",
        max_length: int | None = None,
        truncation: str = "completion_tail",
        bos: bool | None = None,
    ) -> Dataset:
        """Tokenize prompt/completion records: ``[BOS] prompt completion EOS``, loss on the
        completion and EOS only (``labels`` -100 elsewhere). ``completion="completion"`` also
        accepts a ``generation`` field. Longer than ``max_length``: ``truncation`` cuts the
        completion's tail, the prompt's head, or drops the example (all counted).
        ``bos=None`` follows the tokenizer's own policy (GPT-2 adds none)."""
        tok, bos, max_length = self._sft_setup(tokenizer, "tokenize_sft", max_length, truncation, bos)
        return self._add_step(SftStep(tok.ref(), prompt, completion, bos, max_length, truncation), "tokenize_sft")

    def tokenize_chat(
        self,
        tokenizer: Any,
        *,
        template: str | None = None,
        messages: str = "messages",
        max_length: int | None = None,
        truncation: str = "completion_tail",
        bos: bool | None = None,
    ) -> Dataset:
        """Tokenize chat records (``messages: [{role, content}, ...]``) rendered with a Jinja
        ``template`` (a file or a string; default: the tokenizer's chat template). Only
        assistant turns, each followed by EOS, are trained."""
        tok, bos, max_length = self._sft_setup(tokenizer, "tokenize_chat", max_length, truncation, bos)
        source = load_template_source(template, tok.chat_template, tok.name)
        ChatTemplate(source, tok.bos_token, tok.eos_token)  # fail now on a template that does not parse
        return self._add_step(ChatStep(tok.ref(), source, messages, bos, max_length, truncation), "tokenize_chat")

    def _sft_setup(self, tokenizer: Any, name: str, max_length: int | None, truncation: str, bos: bool | None) -> tuple[Any, bool, int | None]:
        tok = load_tokenizer(tokenizer)
        if tok.eos_id is None:
            raise ConfigError(f"{name}(): tokenizer {tok.name!r} has no EOS token to end completions with")
        if truncation not in TRUNCATION_POLICIES:
            raise ConfigError(f"truncation must be one of {TRUNCATION_POLICIES}, got {truncation!r}")
        if max_length is not None:
            _check_int(max_length, "max_length", minimum=2)
        if bos and tok.bos_id is None:
            raise ConfigError(f"{name}(): tokenizer {tok.name!r} has no BOS token")
        return tok, tok.adds_bos() if bos is None else bos, max_length

    def ensure_bos_eos(self, *, bos: bool = True, eos: bool = True) -> Dataset:
        """Add BOS/EOS where a document lacks them (GPT-2, whose BOS is its EOS, included)."""
        if any(isinstance(s, (SftStep, ChatStep)) for s in self._plan.steps):
            raise ConfigError("ensure_bos_eos(): tokenize_sft/tokenize_chat already place BOS and EOS")
        ref = self._tokenizer_ref("ensure_bos_eos")
        if bos and ref.bos_id is None:
            raise ConfigError(f"tokenizer {ref.name!r} has no BOS token; call ensure_bos_eos(bos=False)")
        if eos and ref.eos_id is None:
            raise ConfigError(f"tokenizer {ref.name!r} has no EOS token; call ensure_bos_eos(eos=False)")
        return self._add_step(BosEosStep(ref.bos_id if bos else None, ref.eos_id if eos else None), "ensure_bos_eos")

    def filter_length(self, *, min_tokens: int | None = None, max_tokens: int | None = None) -> Dataset:
        """Skip documents shorter or longer than these token counts (counted as too_short/too_long)."""
        self._tokenizer_ref("filter_length")
        for name, value in (("min_tokens", min_tokens), ("max_tokens", max_tokens)):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
        return self._add_step(LengthFilterStep(min_tokens, max_tokens), "filter_length")

    def concat_chunk(self, seq_len: int, *, remainder: str = "pad") -> Dataset:
        """Concatenate documents and cut rows of ``seq_len`` tokens, with segment/position ids.

        ``remainder`` says what happens to a shard's last partial row: ``pad`` it, ``drop`` it
        (its tokens are counted as dropped) or ``keep`` it shorter.
        """
        return self._set_pack("concat_chunk", "concat", seq_len, remainder=remainder)

    def pad(self, seq_len: int) -> Dataset:
        """One document (or SFT example) a row, truncated (counted) and padded to ``seq_len``."""
        return self._set_pack("pad", "pad", seq_len)

    def pack_examples(self, seq_len: int, *, method: str = "greedy", window: int = 64) -> Dataset:
        """Pack whole examples into padded rows of ``seq_len``, never splitting one.

        ``greedy`` fills rows in order; ``first_fit`` packs each window of ``window`` examples
        first-fit-decreasing, wasting less padding. Segment and position ids restart per
        example; examples longer than ``seq_len`` are skipped and counted as ``too_long``
        (set ``max_length`` on tokenize_sft/tokenize_chat to truncate them instead).
        """
        if method not in ("greedy", "first_fit"):
            raise ConfigError(f"method must be 'greedy' or 'first_fit', got {method!r}")
        ds = self
        if self._plan.cached is None:
            ds = self.filter_length(max_tokens=_check_int(seq_len, "seq_len", minimum=1))
        return ds._set_pack("pack_examples", method, seq_len, window=window if method == "first_fit" else None)

    def sliding_window(self, seq_len: int, *, stride: int | None = None) -> Dataset:
        """Windows of ``seq_len`` tokens every ``stride`` tokens (default: no overlap).

        Overlapped tokens are masked out of the loss in every window but a document's first.
        """
        return self._set_pack("sliding_window", "window", seq_len, stride=stride if stride is not None else seq_len)

    # ------------------------------------------------------ source options

    def shuffle_shards(self, seed: int) -> Dataset:
        """Shuffle the shard order, differently each epoch, with ``seed``."""
        return self._options(shuffle_seed=_check_int(seed, "seed", minimum=0))

    def interleave(self, open_shards: int) -> Dataset:
        """Read ``open_shards`` shards at once, one example from each in turn."""
        return self._options(interleave=_check_int(open_shards, "open_shards", minimum=1))

    def repeat(self, epochs: int | None = None) -> Dataset:
        """Go over the shards ``epochs`` times (None: forever)."""
        if epochs is not None:
            _check_int(epochs, "epochs", minimum=1)
        return self._options(epochs=epochs)

    def parallel(self, workers: int | None = None) -> Dataset:
        """Run the per-shard step in ``workers`` processes ahead of the consumer (None: one per
        core; 0: in this process). The stream is identical for any count, states included.

        Each open shard (see :meth:`interleave`) and the next shards of the order run in their
        own worker; use ``interleave(k)`` with k >= workers to keep every worker busy. Inside
        a torch DataLoader worker the step runs in-process (DataLoader workers cannot fork).
        """
        if workers is None:
            workers = default_workers()
        return self._options(workers=_check_int(workers, "workers", minimum=0))

    def shard_by_rank(self, rank: int, world_size: int, *, split: str = "shards") -> Dataset:
        """Read only this rank's part: whole shards (default) or every world_size-th example."""
        ReaderSplit(rank, world_size, mode=split)
        return self._options(rank=rank, world_size=world_size, split=split)

    # ------------------------------------------------------- stream stages

    def shuffle(self, window: int, *, seed: int = 0) -> Dataset:
        """Shuffle examples within windows of ``window``; a checkpoint re-reads at most one window."""
        return self._add_stage(ShuffleConfig(_check_int(window, "window", minimum=1), _check_int(seed, "seed", minimum=0)))

    def batch(self, size: int, *, drop_last: bool = False, tensors: str = "numpy") -> Dataset:
        """Collate ``size`` examples into a dict of numpy arrays (or torch tensors)."""
        if tensors not in ("numpy", "torch"):
            raise ConfigError(f"tensors must be 'numpy' or 'torch', got {tensors!r}")
        return self._add_stage(BatchConfig(_check_int(size, "batch size", minimum=1), drop_last, tensors))

    def take(self, count: int) -> Dataset:
        """Stop after ``count`` items."""
        return self._add_stage(TakeConfig(_check_int(count, "count", minimum=0)))

    def enumerate(self, start: int = 0) -> Dataset:
        """Yield ``(i, item)`` pairs."""
        return self._add_stage(EnumerateConfig(_check_int(start, "start", minimum=0)))

    # ------------------------------------------------------------ iteration

    @property
    def spec(self) -> Spec:
        """The per-shard step as a Spec (what the Beam pipeline runs, and what keys caches)."""
        p = self._plan
        if p.cached is not None:
            return Spec.from_json(self.spec_json)
        return Spec(p.source, p.steps, p.pack, p.on_error)  # type: ignore[arg-type]

    @property
    def spec_json(self) -> dict[str, Any]:
        cached = self._plan.cached
        if cached is None:
            return self.spec.to_json()
        spec = dict(cached.cache.manifest.spec)
        if cached.repack is not None:
            spec["pack"] = cached.repack.to_json()
        return spec

    @property
    def spec_fingerprint(self) -> str:
        return fingerprint_of(self.spec_json)

    @property
    def is_cached(self) -> bool:
        return self._plan.cached is not None

    @property
    def stream_fingerprint(self) -> str:
        p = self._plan
        urls = hashlib.sha256("\n".join(s.url for s in p.shards).encode()).hexdigest()[:20]
        return fingerprint_of(
            {
                "shards": len(p.shards),
                "urls": urls,
                "options": p.options.to_json(),
                "stages": [s.to_json() for s in p.stages],
            }
        )

    @property
    def shards(self) -> tuple[Shard, ...]:
        return self._plan.shards

    def iter(self, state_dict: dict[str, Any] | None = None, *, start_example: int | None = None) -> DatasetIterator:
        """A fresh iterator, one resumed from ``state_dict`` (never mutated), or one starting
        at global example ``start_example`` of the source (cached datasets only: it needs the
        row counts of the manifest)."""
        split = self._reader_split()
        if start_example is None:
            return DatasetIterator(self, split, state_dict)
        if state_dict is not None:
            raise ConfigError("pass state_dict or start_example, not both")
        it = DatasetIterator(self, split)
        it.source.reset(self._source_state_at(_check_int(start_example, "start_example", minimum=0), it))
        return it

    def cache(
        self,
        output_dir: str,
        *,
        overwrite: bool = False,
        progress: bool = False,
        row_group_rows: int | None = None,
        row_group_bytes: int | None = None,
        **beam_options: Any,
    ) -> Dataset:
        """Run the Beam pipeline over this dataset's per-shard step, writing a Parquet cache to
        ``output_dir``; return the cached dataset with this dataset's stream stages.

        ``beam_options`` pass through as pipeline options (``runner="DataflowRunner"``,
        ``direct_running_mode="multi_processing"``, ``direct_num_workers=2``, ...). Re-running
        completes an unfinished cache; a cache of another spec is refused unless ``overwrite``.
        Parquet row groups hold ``row_group_rows`` rows or about ``row_group_bytes`` of tokens
        (default 8 MB): small groups make random access cheaper, large ones read faster.
        """
        if self.is_cached:
            raise ConfigError("this dataset already reads a cache")
        from pipelines.cache import run_cache

        run_cache(
            self.spec,
            self.shards,
            output_dir,
            beam_args(beam_options),
            overwrite=overwrite,
            progress=progress,
            row_group_rows=row_group_rows,
            row_group_bytes=row_group_bytes,
        )
        cached = Dataset.from_cache(output_dir, fingerprint=self.spec_fingerprint)
        return cached._replace(stages=self._plan.stages, options=self._plan.options)

    def __iter__(self) -> Iterator[Any]:
        return self.iter()

    def to_torch(self) -> Any:
        """A ``torch.utils.data.IterableDataset`` with ``state_dict()``/``load_state_dict()``."""
        from beamtok.stream.torch_dataset import TorchIterableDataset

        return TorchIterableDataset(self)

    def _opener(self) -> ShardOpener:
        cached = self._plan.cached
        if cached is None:
            workers = self._plan.options.workers
            if workers and _dataloader_worker()[1] == 1:
                return ParallelShards(self.spec, workers)
            return ShardProcessor(self.spec).run
        if cached.repack is not None:
            return cached.cache.repacked(cached.repack)
        return cached.cache.open_rows

    def _pad_id(self) -> int:
        spec = self.spec_json
        if spec["pack"] is not None:
            return int(spec["pack"]["pad_id"])
        ref = self._tokenizer_json()
        return int(ref["pad_id"]) if ref is not None else 0

    def _tokenizer_json(self) -> dict[str, Any] | None:
        refs = [s["tokenizer"] for s in self.spec_json["steps"] if "tokenizer" in s]
        return refs[-1] if refs else None

    def _build(self, split: ReaderSplit) -> tuple[ShardSource, Node]:
        p = self._plan
        return build_stream(list(p.shards), self._opener(), p.options, p.stages, split, self._pad_id())

    def _source_state_at(self, example: int, it: DatasetIterator) -> dict[str, Any]:
        """The shard source's state just before global example ``example``."""
        cached = self._plan.cached
        o = self._plan.options
        if cached is None or cached.repack is not None:
            raise ConfigError("start_example needs the row counts of a cache (not repacked); on the fly, resume from a state_dict")
        if o.interleave != 1 or it.split.parts > 1:
            raise ConfigError("start_example works with interleave(1) and a single reader")
        rows = [entry.rows for entry in cached.cache.manifest.shards]
        stats = it.source.stats.to_json()
        left = example
        epoch = 0
        for epoch in itertools.count() if o.epochs is None else range(o.epochs):
            order = it.source.order(epoch)
            for position, shard in enumerate(order):
                if left < rows[shard]:
                    slot = {"shard": shard, "cursor": cached.cache.cursor_at(shard, left).to_json()}
                    return {"epoch": epoch, "position": position + 1, "slots": [slot], "turn": 0, "stats": stats}
                left -= rows[shard]
            if sum(rows[s] for s in order) == 0:
                break
        if left == 0:  # exactly the end of the stream
            return {"epoch": epoch, "position": len(it.source.order(epoch)), "slots": [], "turn": 0, "stats": stats}
        raise ConfigError(f"start_example {example} is past the end of the stream")

    def _reader_split(self) -> ReaderSplit:
        o = self._plan.options
        worker, num_workers = _dataloader_worker()
        return ReaderSplit(o.rank, o.world_size, worker, num_workers, o.split)

    # -------------------------------------------------------------- helpers

    def _replace(self, **changes: Any) -> Dataset:
        return type(self)(dataclasses.replace(self._plan, **changes))

    def _add_step(self, step: Step, name: str) -> Dataset:
        if self._plan.cached is not None:
            raise ConfigError(f"{name}(): a cache's per-shard stages were fixed when it was built")
        if self._plan.stages:
            raise ConfigError(f"{name}() is a per-shard stage; call it before shuffle/batch/take/enumerate")
        if self._plan.pack is not None:
            raise ConfigError(f"{name}() works on documents; call it before the packing stage")
        return self._replace(steps=(*self._plan.steps, step))

    def _set_pack(self, name: str, mode: str, seq_len: int, **kwargs: Any) -> Dataset:
        if self._plan.stages:
            raise ConfigError(f"{name}() is a per-shard stage; call it before shuffle/batch/take/enumerate")
        cached = self._plan.cached
        if cached is not None:
            if cached.cache.manifest.spec["pack"] is not None or cached.repack is not None:
                raise ConfigError(f"{name}(): the cache is already packed; build it with --pack none to pack at read time")
            pack = PackSpec(mode, seq_len, self._pad_id(), **kwargs)  # type: ignore[arg-type]
            return self._replace(cached=dataclasses.replace(cached, repack=pack))
        ref = self._tokenizer_ref(name)
        if self._plan.pack is not None:
            raise ConfigError(f"{name}(): the dataset is already packed ({self._plan.pack.mode})")
        return self._replace(pack=PackSpec(mode, seq_len, ref.pad_id, **kwargs))  # type: ignore[arg-type]

    def _add_stage(self, stage: StageConfig) -> Dataset:
        return self._replace(stages=(*self._plan.stages, stage))

    def _options(self, **changes: Any) -> Dataset:
        return self._replace(options=dataclasses.replace(self._plan.options, **changes))

    def _tokenizer_ref(self, name: str) -> Any:
        ref = self.spec.tokenizer
        if ref is None:
            raise ConfigError(f"{name}() needs tokens: call tokenize() before it")
        return ref

    def __repr__(self) -> str:
        p = self._plan
        steps = [s.to_json()["op"] for s in p.steps] + ([p.pack.mode] if p.pack else [])
        stages = [s.to_json()["stage"] for s in p.stages]
        return f"Dataset(shards={len(p.shards)}, steps={steps}, stages={stages})"


def beam_args(options: dict[str, Any]) -> list[str]:
    """Keyword Beam options as command-line flags: ``direct_num_workers=2`` -> ``--direct_num_workers=2``."""
    args = []
    for key, value in options.items():
        if value is True:
            args.append(f"--{key}")
        elif value is not False and value is not None:
            args.append(f"--{key}={value}")
    return args


def _check_int(value: Any, name: str, *, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_on_error(on_error: str) -> str:
    if on_error not in ("raise", "skip"):
        raise ConfigError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    return on_error


def _split_sequence(data: Any, shards: int) -> list[Any]:
    _check_int(shards, "shards", minimum=1)
    n = len(data)
    bounds = [n * i // shards for i in range(shards + 1)]
    if shards == 1:
        return [data]
    if hasattr(data, "select"):  # datasets.Dataset: a cheap view of the rows
        return [data.select(range(a, b)) for a, b in itertools.pairwise(bounds)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def _dataloader_worker() -> tuple[int, int]:
    """(worker id, worker count) inside a torch DataLoader worker, else (0, 1)."""
    torch_data = sys.modules.get("torch.utils.data")
    if torch_data is None:
        return 0, 1
    info = torch_data.get_worker_info()
    return (0, 1) if info is None else (info.id, info.num_workers)


