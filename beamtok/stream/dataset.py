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

A Dataset is immutable: every method returns a new one. It holds one :class:`Spec` (the
per-shard step: map, filter, tokenize, ensure_bos_eos, filter_length, packing), where its
shards come from (files read now, or a cache: a ``ShardOrigin``), and its stream stages
(shuffle, batch, take, enumerate), which run after the per-shard step in both modes.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from beamtok.errors import ConfigError
from beamtok.sources.urls import Shard, expand_urls
from beamtok.spec import PackSpec, SourceSpec, Spec, callable_name, fingerprint_of
from beamtok.steps import BosEosStep, ChatStep, FilterStep, LengthFilterStep, MapStep, SftStep, Step, TokenizeStep
from beamtok.stream.backend import OnTheFlyOrigin, ShardOrigin
from beamtok.stream.batch import Batch
from beamtok.stream.enumerate import Enumerate
from beamtok.stream.global_shuffle import GlobalShuffleSource
from beamtok.stream.iterator import DatasetIterator
from beamtok.stream.mix import MixPlan, MixSource
from beamtok.stream.node import Node, Stage, StreamContext
from beamtok.stream.shuffle import Shuffle
from beamtok.stream.source import ShardSource, SourceOptions
from beamtok.stream.split import ExampleSplitNode, ReaderSplit, dataloader_worker
from beamtok.stream.take import Take
from beamtok.transforms.sft import ChatTemplate, load_template_source
from beamtok.transforms.tokenize import Tokenizer, TokenizerRef, load_tokenizer
from beamtok.validate import check_choice, check_int

__all__ = ["Dataset", "beam_args"]


@dataclass(frozen=True)
class _Mix:
    sources: tuple[Dataset, ...]
    plan: MixPlan


@dataclass(frozen=True)
class _Plan:
    shards: tuple[Shard, ...]
    spec: Spec
    origin: ShardOrigin = dataclasses.field(default_factory=OnTheFlyOrigin, compare=False)
    stages: tuple[Stage, ...] = ()
    options: SourceOptions = dataclasses.field(default_factory=SourceOptions)
    mix: _Mix | None = None


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
        source = SourceSpec(format, text_field, tuple(columns) if columns is not None else None)
        spec = Spec(source, on_error=on_error)  # type: ignore[arg-type]
        shards = tuple(Shard(i, url) for i, url in enumerate(expand_urls(urls)))
        return cls(_Plan(shards, spec))

    @classmethod
    def from_sequence(
        cls, data: Sequence[Any] | Sequence[Sequence[Any]], *, text_field: str = "text", shards: int = 1, on_error: str = "raise"
    ) -> Dataset:
        """Read an in-memory sequence of strings or dicts (a list, a ``datasets.Dataset``...).

        ``shards`` > 1 splits it into that many contiguous shards.
        """
        spec = Spec(SourceSpec("memory", text_field), on_error=on_error)  # type: ignore[arg-type]
        parts = _split_sequence(data, shards)
        return cls(_Plan(tuple(Shard(i, f"memory://sequence/{i}", part) for i, part in enumerate(parts)), spec))

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
        spec = Spec(SourceSpec("memory", text_field), on_error=on_error)  # type: ignore[arg-type]
        return cls(_Plan((Shard(0, "memory://iterable/0", factory),), spec))

    @classmethod
    def from_cache(cls, directory: str, *, fingerprint: str | None = None) -> Dataset:
        """Reopen a cache built by ``beamtok cache`` or :meth:`cache` as a dataset.

        It yields the examples the on-the-fly pipeline of the same spec yields, with the same
        cursors, so states cross between the two. Pass ``fingerprint`` to insist on a spec.
        A cache built without packing can be packed here with ``.concat_chunk(n)`` etc.
        """
        from beamtok.cache.backend import CacheOrigin  # pyarrow is imported only for caches

        origin = CacheOrigin.open(directory, fingerprint=fingerprint)
        return cls(_Plan(tuple(origin.shards), origin.spec, origin))

    @classmethod
    def mix(
        cls,
        datasets: Sequence[Dataset],
        weights: Sequence[float] | Sequence[tuple[int, Sequence[float]]] | None = None,
        *,
        seed: int = 0,
        stop: str = "never",
        block_size: int | None = None,
    ) -> Dataset:
        """Mix the examples of several datasets (each on the fly or from a cache) by weight.

        The source of each example is a function of (seed, example index, weights): every
        block of ``block_size`` examples (default 4096, or more for weights too small for it)
        holds each source's exact share, by largest remainder, in a seeded order. ``weights``
        may be a schedule ``[(start_example, weights), ...]`` whose stages start at block
        boundaries. ``stop``: ``"never"`` (an exhausted source restarts, its next epoch
        reshuffled), ``"first_exhausted"`` or ``"all_exhausted"``. Give each source its own
        per-shard stages and shard options (``shuffle_shards``, ``interleave``, ``parallel``);
        add stream stages (``shuffle``, ``batch``, ``shard_by_rank``...) to the mix.
        """
        sources = tuple(datasets)
        if not sources or not all(isinstance(d, Dataset) for d in sources):
            raise ConfigError("mix() takes a non-empty list of Datasets")
        for i, d in enumerate(sources):
            p = d._plan
            if p.mix is not None:
                raise ConfigError(f"mix source {i} is itself a mix; list its sources in one mix with combined weights")
            if p.stages:
                raise ConfigError(f"mix source {i} has stream stages {[s.NAME for s in p.stages]}; add them to the mix instead")
            if p.options.world_size != 1:
                raise ConfigError(f"mix source {i} is split by rank; call shard_by_rank() on the mix instead")
            if stop != "first_exhausted" and p.options.epochs != 1:
                raise ConfigError(f"mix source {i} sets repeat(); with stop={stop!r} the mix restarts exhausted sources itself")
        pads = {d._plan.spec.pad_id for d in sources}
        if len(pads) > 1:
            raise ConfigError(f"mix sources pad with different token ids {sorted(pads)}: they use different tokenizers")
        plan = MixPlan.make(len(sources), weights, seed=seed, stop=stop, block_size=block_size)
        return cls(_Plan((), sources[0]._plan.spec, mix=_Mix(sources, plan)))

    @classmethod
    def from_hf(
        cls,
        dataset: Any,
        *,
        text_field: str = "text",
        shards: int = 1,
        on_error: str = "raise",
        split: str = "train",
        config: str | None = None,
    ) -> Dataset:
        """Read a Hugging Face dataset.

        A loaded ``datasets.Dataset`` (map-style) is read in ``shards`` column slices. A
        ``datasets.IterableDataset`` (streamed) is read in its own shards; its cursor is the
        row number in a shard, so a resume re-reads (never re-tokenizes) that shard's rows
        before the cursor. A
        string names the dataset's files instead, one shard per file, read as beamtok reads
        any file (and cacheable by ``beamtok cache --hf-dataset``): a directory written by
        ``save_to_disk`` (a ``DatasetDict``'s: pick ``split``), a directory of data files, or a
        hub name when the hub is reachable (``config`` selects its configuration)."""
        if isinstance(dataset, (str, os.PathLike)):
            from beamtok.sources.hf_files import hf_dataset_files

            found = hf_dataset_files(os.fspath(dataset), split=split, config=config)
            return cls.from_files(found.urls, format=found.format, text_field=text_field, on_error=on_error)
        kind = type(dataset).__name__
        if kind in ("DatasetDict", "IterableDatasetDict"):
            raise ConfigError(f"from_hf(): a {kind} holds several splits ({sorted(dataset)}); pass one, e.g. dataset['train']")
        if kind == "IterableDataset":
            if shards != 1:
                raise ConfigError(f"from_hf(): an IterableDataset is read in its own {dataset.num_shards} shards; drop shards=")
            count = max(1, int(getattr(dataset, "num_shards", 1) or 1))
            spec = Spec(SourceSpec("memory", text_field), on_error=on_error)  # type: ignore[arg-type]
            parts = tuple(Shard(i, f"memory://hf-iterable/{i}", HfIterableShard(dataset, count, i)) for i in range(count))
            return cls(_Plan(parts, spec))
        return cls.from_sequence(dataset, text_field=text_field, shards=shards, on_error=on_error)

    @classmethod
    def from_mds(
        cls,
        url: str | os.PathLike[str],
        *,
        split: str | None = None,
        text_field: str = "text",
        columns: Sequence[str] | None = None,
        on_error: str = "raise",
    ) -> Dataset:
        """Read a MosaicML Streaming dataset (MDS shards written by ``streaming.MDSWriter``).

        ``url`` is the dataset's directory (local, ``s3://``, ``gs://``, ``https://``) or its
        ``index.json``; ``split`` is a subdirectory, as Streaming's ``split=``. Each shard file
        is one beamtok shard read in the index's order, its cursor the sample index inside it,
        so a resume seeks straight to the sample. The streaming package is not needed. Text,
        bytes, number and JSON columns are read; pickled columns are refused.
        """
        from beamtok.sources.mds import mds_shard_urls

        urls = mds_shard_urls(os.fspath(url), split=split)
        return cls.from_files(urls, format="mds", text_field=text_field, columns=columns, on_error=on_error)

    # ------------------------------------------------------- per-shard stages

    def map(self, fn: Callable[[dict[str, Any]], dict[str, Any]], *, name: str | None = None) -> Dataset:
        """Transform each document record (before or after tokenize)."""
        return self._add_step(MapStep(name or callable_name(fn), fn))

    def filter(self, fn: Callable[[dict[str, Any]], bool], *, name: str | None = None) -> Dataset:
        """Keep documents for which ``fn(record)`` is true; others count as ``filtered``."""
        return self._add_step(FilterStep(name or callable_name(fn), fn))

    def tokenize(self, tokenizer: Any, *, field: str | None = None, add_special_tokens: bool = True, backend: str = "auto") -> Dataset:
        """Tokenize the text field with a fast tokenizer (a path, hub name or loaded tokenizer).

        ``backend="auto"`` encodes through tiktoken, several times faster, when the tokenizer
        is byte-level BPE that tiktoken reproduces exactly (GPT-2, cl100k, o200k, Llama-3 and
        the like: checked from its files, then on probe strings), and through Hugging Face
        ``tokenizers`` otherwise; ``"tiktoken"`` insists on the fast path (refusing a tokenizer
        it cannot reproduce), ``"hf"`` never takes it. The tokens, and so the fingerprints and
        states, are the same whichever runs.
        """
        self._plan.origin.check_step("tokenize")
        tok = load_tokenizer(tokenizer)
        step = TokenizeStep(tok.ref(), field or self._plan.spec.source.text_field, add_special_tokens, backend)
        if backend == "tiktoken":
            tok.tiktoken()  # refuse now a tokenizer tiktoken cannot reproduce
        return self._add_step(step)

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
        self._plan.origin.check_step("tokenize_sft")
        tok = load_tokenizer(tokenizer)
        step = SftStep(tok.ref(), _bos_policy(tok, bos), max_length, truncation, prompt=prompt, completion=completion)
        return self._add_step(step)

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
        self._plan.origin.check_step("tokenize_chat")
        tok = load_tokenizer(tokenizer)
        source = load_template_source(template, tok.chat_template, tok.name)
        step = ChatStep(tok.ref(), _bos_policy(tok, bos), max_length, truncation, template=source, messages=messages)
        ChatTemplate(source, tok.bos_token, tok.eos_token)  # fail now on a template that does not parse
        return self._add_step(step)

    def ensure_bos_eos(self, *, bos: bool = True, eos: bool = True) -> Dataset:
        """Add BOS/EOS where a document lacks them (GPT-2, whose BOS is its EOS, included)."""
        if any(s.SUPERVISED for s in self._plan.spec.steps):
            raise ConfigError("ensure_bos_eos(): tokenize_sft/tokenize_chat already place BOS and EOS")
        ref = self._tokenizer_ref("ensure_bos_eos")
        if bos and ref.bos_id is None:
            raise ConfigError(f"tokenizer {ref.name!r} has no BOS token; call ensure_bos_eos(bos=False)")
        if eos and ref.eos_id is None:
            raise ConfigError(f"tokenizer {ref.name!r} has no EOS token; call ensure_bos_eos(eos=False)")
        return self._add_step(BosEosStep(ref.bos_id if bos else None, ref.eos_id if eos else None))

    def filter_length(self, *, min_tokens: int | None = None, max_tokens: int | None = None) -> Dataset:
        """Skip documents shorter or longer than these token counts (counted as too_short/too_long)."""
        return self._add_step(LengthFilterStep(min_tokens, max_tokens))

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
        (set ``max_length`` on tokenize_sft/tokenize_chat to truncate them instead). The same
        holds when packing an unpacked cache at read time.
        """
        check_choice(method, "method", ("greedy", "first_fit"))
        return self._set_pack("pack_examples", method, seq_len, window=window if method == "first_fit" else None)

    def sliding_window(self, seq_len: int, *, stride: int | None = None) -> Dataset:
        """Windows of ``seq_len`` tokens every ``stride`` tokens (default: no overlap).

        Overlapped tokens are masked out of the loss in every window but a document's first.
        """
        return self._set_pack("sliding_window", "window", seq_len, stride=stride if stride is not None else seq_len)

    # ------------------------------------------------------ source options

    def shuffle_shards(self, seed: int) -> Dataset:
        """Shuffle the shard order, differently each epoch, with ``seed``."""
        return self._options(shuffle_seed=seed)

    def interleave(self, open_shards: int) -> Dataset:
        """Read ``open_shards`` shards at once, one example from each in turn."""
        return self._options(interleave=open_shards)

    def repeat(self, epochs: int | None = None) -> Dataset:
        """Go over the shards ``epochs`` times (None: forever)."""
        return self._options(epochs=epochs)

    def parallel(self, workers: int | None = None) -> Dataset:
        """Run the per-shard step in ``workers`` processes ahead of the consumer (None: one per
        core; 0: in this process). The stream is identical for any count, states included.

        Each open shard (see :meth:`interleave`) and the next shards of the order run in their
        own worker; use ``interleave(k)`` with k >= workers to keep every worker busy. Inside
        a torch DataLoader worker the step runs in-process (DataLoader workers cannot fork).
        Workers start at the iterator's first ``next()``.
        """
        from beamtok.stream.parallel import default_workers

        return self._options(workers=default_workers() if workers is None else workers)

    def global_shuffle(self, seed: int = 0, *, window: int | None = None) -> Dataset:
        """Every row of a packed cache once per epoch, in a keyed pseudo-random permutation
        over the whole cache (``window=None``) or within windows of ``window`` consecutive
        rows, reshuffled each epoch (``repeat``). Readers (``shard_by_rank``, DataLoader
        workers) take every k-th position of the one global order; the state is
        ``{epoch, position}``. Build the cache with small row groups
        (``--row-group-rows``) for cheap random access."""
        self._refuse_on_mix("global_shuffle()")
        o = self._plan.options
        if o.shuffle_seed is not None or o.interleave != 1 or o.workers:
            raise ConfigError("global_shuffle() replaces shuffle_shards(), interleave() and parallel(); drop them")
        if self._plan.origin.row_access(self._plan.spec) is None:
            raise ConfigError(
                "global_shuffle() needs random access to rows: a packed cache (Dataset.from_cache), not repacked"
            )
        return self._replace(options=dataclasses.replace(o, global_seed=seed, global_window=window))

    def shard_by_rank(self, rank: int, world_size: int, *, split: str = "shards") -> Dataset:
        """Read only this rank's part: whole shards (default) or every world_size-th example."""
        return self._options(rank=rank, world_size=world_size, split=split)

    # ------------------------------------------------------- stream stages

    def shuffle(self, window: int, *, seed: int = 0) -> Dataset:
        """Shuffle examples within windows of ``window``; a checkpoint re-reads at most one window."""
        return self._add_stage(Shuffle(window, seed))

    def batch(self, size: int, *, drop_last: bool = False, tensors: str = "numpy") -> Dataset:
        """Collate ``size`` examples into a dict of numpy arrays (or torch tensors)."""
        return self._add_stage(Batch(size, drop_last, tensors))

    def take(self, count: int) -> Dataset:
        """Stop after ``count`` items."""
        return self._add_stage(Take(count))

    def enumerate(self, start: int = 0) -> Dataset:
        """Yield ``(i, item)`` pairs."""
        return self._add_stage(Enumerate(start))

    # ------------------------------------------------------------ iteration

    @property
    def spec(self) -> Spec:
        """The per-shard step as a Spec (what the Beam pipeline runs, and what keys caches)."""
        if self._plan.mix is not None:
            raise ConfigError("a mix has one spec per source: see ds.sources[i].spec")
        return self._plan.spec

    @property
    def sources(self) -> tuple[Dataset, ...]:
        """The datasets a mix mixes (a plain dataset: itself)."""
        return self._plan.mix.sources if self._plan.mix is not None else (self,)

    @property
    def spec_fingerprint(self) -> str:
        mix = self._plan.mix
        if mix is not None:  # the same for on-the-fly and cached twins of every source
            return fingerprint_of({"mix": mix.plan.to_json(), "sources": [d.spec_fingerprint for d in mix.sources]})
        return self._plan.spec.fingerprint

    @property
    def is_cached(self) -> bool:
        return self._plan.origin.cached

    def stream_fingerprint_for(self, world_size: int) -> str:
        """The stream fingerprint this dataset has when split over ``world_size`` ranks."""
        options = dataclasses.replace(self._plan.options, rank=0, world_size=world_size)
        return self._replace(options=options).stream_fingerprint

    @property
    def stream_fingerprint(self) -> str:
        p = self._plan
        if p.mix is not None:
            sources = [d.stream_fingerprint for d in p.mix.sources]
            return fingerprint_of({"mix": sources, "options": p.options.to_json(), "stages": [s.to_json() for s in p.stages]})
        urls = hashlib.sha256("\n".join(s.url for s in p.shards).encode()).hexdigest()[:20]
        return fingerprint_of(
            {"shards": len(p.shards), "urls": urls, "options": p.options.to_json(), "stages": [s.to_json() for s in p.stages]}
        )

    @property
    def shards(self) -> tuple[Shard, ...]:
        return self._plan.shards

    def iter(
        self, state_dict: dict[str, Any] | list[dict[str, Any]] | None = None, *, start_example: int | None = None
    ) -> DatasetIterator:
        """A fresh iterator, one resumed from ``state_dict`` (never mutated; a list: every
        reader's state of a run on another world size, see the README), or one starting
        at global example ``start_example`` of the source (packed caches only: it needs the
        row counts of the manifest). Nothing is read and no worker starts before ``next()``;
        use the iterator as a context manager (or call ``close()``) to stop workers early."""
        split = self._reader_split()
        if start_example is None:
            return DatasetIterator(self, split, state_dict)
        if state_dict is not None:
            raise ConfigError("pass state_dict or start_example, not both")
        it = DatasetIterator(self, split)
        it.source.reset(it.source.state_at(check_int(start_example, "start_example")))
        return it

    def cache(
        self,
        output_dir: str,
        *,
        overwrite: bool = False,
        progress: bool = True,
        row_group_rows: int | None = None,
        row_group_bytes: int | None = None,
        split_bytes: int | str | None = "16MiB",
        **beam_options: Any,
    ) -> Dataset:
        """Run the Beam pipeline over this dataset's per-shard step, writing a Parquet cache to
        ``output_dir``; return the cached dataset with this dataset's stream stages.

        ``beam_options`` pass through as pipeline options (``runner="DataflowRunner"``,
        ``direct_running_mode="multi_processing"``, ``direct_num_workers=2``, ...). Re-running
        completes an unfinished cache; a cache of another spec or of other input files is
        refused unless ``overwrite``, which removes every file of the old cache.
        Parquet row groups hold ``row_group_rows`` rows or about ``row_group_bytes`` of tokens
        (default 8 MB): small groups make random access cheaper, large ones read faster.
        Input files larger than ``split_bytes`` (uncompressed JSONL by byte ranges, Parquet by
        row groups; None: never) are tokenized in ranges by several workers and packed in
        order: the cache is byte for byte the one an unsplit build writes.
        ``progress`` shows a bar on a terminal (a line every 10 s and one at the end elsewhere)
        for local runs; Beam's worker chatter is hidden unless the ``apache_beam`` logger's
        level is set lower than ERROR.
        """
        if self.is_cached:
            raise ConfigError("this dataset already reads a cache")
        if self._plan.mix is not None:
            raise ConfigError("cache each source of a mix, then mix the cached datasets")
        from beamtok.cache.build import run_cache

        run_cache(
            self.spec,
            self.shards,
            output_dir,
            beam_args(beam_options),
            overwrite=overwrite,
            progress=progress,
            row_group_rows=row_group_rows,
            row_group_bytes=row_group_bytes,
            split_bytes=split_bytes,
        )
        cached = Dataset.from_cache(output_dir, fingerprint=self.spec_fingerprint)
        return cached._replace(stages=self._plan.stages, options=self._plan.options)

    def cache_as_you_go(self, directory: str, *, row_group_rows: int | None = None, row_group_bytes: int | None = None) -> Dataset:
        """This dataset, streamed on the fly while every shard it reads whole is written into a
        cache at ``directory`` (the files, manifest and checksums a Beam build writes); shards
        already cached there are read from it instead of being tokenized again. The stream and
        its states are the same as on the fly and as from the finished cache. Call it after
        the per-shard stages (tokenize, pack), before stream stages."""
        if self.is_cached:
            raise ConfigError("this dataset already reads a cache")
        if self._plan.mix is not None:
            raise ConfigError("call cache_as_you_go() on each source of a mix, then mix them")
        if self._plan.stages:
            raise ConfigError("cache_as_you_go() caches the per-shard step: call it before shuffle/batch/take/enumerate")
        if self.spec.tokenizer is None:
            raise ConfigError("a cache holds tokens: call tokenize() before cache_as_you_go()")
        if any(shard.data is not None for shard in self._plan.shards):
            raise ConfigError("cache_as_you_go() caches files; in-memory data has no file a cache could stand for")
        from beamtok.cache.as_you_go import CachingOrigin
        from beamtok.validate import check_optional_int

        check_optional_int(row_group_rows, "row_group_rows", minimum=1)
        check_optional_int(row_group_bytes, "row_group_bytes", minimum=1)
        layout = {"row_group_rows": row_group_rows, "row_group_bytes": row_group_bytes}
        return self._replace(origin=CachingOrigin(directory, self._plan.shards, layout))

    def __iter__(self) -> Iterator[Any]:
        return self.iter()

    def to_torch(self, *, resume_from: list[dict[str, Any]] | None = None) -> Any:
        """A ``torch.utils.data.IterableDataset`` with ``state_dict()``/``load_state_dict()``,
        for torchdata's ``StatefulDataLoader`` (any number of workers).

        ``resume_from``: every reader state of a run with another world size or number of
        DataLoader workers (``beamtok.reader_states(*loader_state_dicts)`` gathers them from
        each old rank's ``loader.state_dict()``); each new worker of each new rank resumes
        its share of what they left."""
        from beamtok.stream.torch_dataset import TorchIterableDataset

        adapter = TorchIterableDataset(self)
        if resume_from is not None:
            adapter.load_state_dict(resume_from)
        return adapter

    def _build(
        self, split: ReaderSplit, stages: int | None = None
    ) -> tuple[ShardSource | MixSource | GlobalShuffleSource, Node]:
        """The live stream for one reader: its root source (for stats and seeks) and its last
        node (after the first ``stages`` stream stages, or all)."""
        p = self._plan
        source: ShardSource | MixSource | GlobalShuffleSource
        o = p.options
        if p.mix is not None:
            forever = p.mix.plan.stop != "first_exhausted"
            source = MixSource([self._mix_source(i, split, forever) for i in range(len(p.mix.sources))], p.mix.plan, split)
        elif o.global_seed is not None:
            rows = p.origin.row_access(p.spec)
            assert rows is not None  # checked by global_shuffle()
            source = GlobalShuffleSource(rows, seed=o.global_seed, window=o.global_window, epochs=o.epochs, split=split)
        else:
            source = self._shard_source(split, forever=False)
        node: Node = source
        if split.mode == "examples" and o.global_seed is None:  # a global shuffle splits positions itself
            node = ExampleSplitNode(node, split.part, split.parts)
        for depth, stage in enumerate(p.stages[:stages]):
            context = StreamContext(pad_id=p.spec.pad_id, rebuild=functools.partial(self._build, stages=depth))
            node = stage.build(node, context)
        return source, node

    def _mix_source(self, i: int, split: ReaderSplit, forever: bool) -> ShardSource:
        assert self._plan.mix is not None
        try:
            return self._plan.mix.sources[i]._shard_source(split, forever)
        except ConfigError as error:
            raise ConfigError(f"mix source {i}: {error}") from None

    def _shard_source(self, split: ReaderSplit, forever: bool) -> ShardSource:
        p = self._plan
        options = dataclasses.replace(p.options, epochs=None) if forever else p.options
        return ShardSource(list(p.shards), p.origin.backend(p.spec, p.options.workers), options, split)

    def _reader_split(self) -> ReaderSplit:
        o = self._plan.options
        worker, num_workers = dataloader_worker()
        return ReaderSplit(o.rank, o.world_size, worker, num_workers, o.split)

    # -------------------------------------------------------------- helpers

    def _replace(self, **changes: Any) -> Dataset:
        return type(self)(dataclasses.replace(self._plan, **changes))

    def _add_step(self, step: Step) -> Dataset:
        name = step.OP
        self._refuse_on_mix(f"{name}()")
        self._plan.origin.check_step(name)
        if self._plan.stages:
            raise ConfigError(f"{name}() is a per-shard stage; call it before shuffle/batch/take/enumerate")
        spec = self._plan.spec
        if spec.pack is not None:
            raise ConfigError(f"{name}() works on documents; call it before the packing stage")
        return self._replace(spec=dataclasses.replace(spec, steps=(*spec.steps, step)))

    def _set_pack(self, name: str, mode: str, seq_len: int, **kwargs: Any) -> Dataset:
        self._refuse_on_mix(f"{name}()")
        if self._plan.stages:
            raise ConfigError(f"{name}() is a per-shard stage; call it before shuffle/batch/take/enumerate")
        self._plan.origin.check_pack(name)
        spec = self._plan.spec
        if spec.pack is not None:
            raise ConfigError(f"{name}(): the dataset is already packed ({spec.pack.mode})")
        ref = self._tokenizer_ref(name)
        pack = PackSpec(mode, seq_len, ref.pad_id, **kwargs)  # type: ignore[arg-type]
        return self._replace(spec=dataclasses.replace(spec, pack=pack))

    def _add_stage(self, stage: Stage) -> Dataset:
        return self._replace(stages=(*self._plan.stages, stage))

    def _options(self, **changes: Any) -> Dataset:
        if set(changes) - {"rank", "world_size", "split"}:
            self._refuse_on_mix(", ".join(sorted(changes)))
        if self._plan.options.global_seed is not None and set(changes) & {"shuffle_seed", "interleave", "workers"}:
            raise ConfigError("global_shuffle() replaces shuffle_shards(), interleave() and parallel()")
        return self._replace(options=dataclasses.replace(self._plan.options, **changes))

    def _refuse_on_mix(self, what: str) -> None:
        if self._plan.mix is not None:
            raise ConfigError(f"{what}: set it on each source of the mix, before Dataset.mix()")

    def _tokenizer_ref(self, name: str) -> TokenizerRef:
        ref = self._plan.spec.tokenizer
        if ref is None:
            raise ConfigError(f"{name}() needs tokens: call tokenize() before it")
        return ref

    def __repr__(self) -> str:
        p = self._plan
        if p.mix is not None:
            return f"Dataset.mix({list(p.mix.sources)}, stages={[s.NAME for s in p.stages]})"
        steps = [s.OP for s in p.spec.steps] + ([p.spec.pack.mode] if p.spec.pack else [])
        stages = [s.NAME for s in p.stages]
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


@dataclasses.dataclass(frozen=True)
class HfIterableShard:
    """One of a Hugging Face ``IterableDataset``'s shards, iterated afresh on each call."""

    dataset: Any
    count: int
    index: int

    def __call__(self) -> Iterable[Any]:
        if self.count == 1:
            return iter(self.dataset)
        return iter(self.dataset.shard(num_shards=self.count, index=self.index))


def _bos_policy(tok: Tokenizer, bos: bool | None) -> bool:
    """An explicit BOS choice, or the tokenizer's own policy."""
    return tok.adds_bos() if bos is None else bos


def _split_sequence(data: Any, shards: int) -> list[Any]:
    check_int(shards, "shards", minimum=1)
    n = len(data)
    bounds = [n * i // shards for i in range(shards + 1)]
    if shards == 1:
        return [data]
    if hasattr(data, "select"):  # datasets.Dataset: a cheap view of the rows
        return [data.select(range(a, b)) for a, b in itertools.pairwise(bounds)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]
