"""An exact fast path for tokenizers whose model encodes word by word — WordPiece (BERT's
kind), Unigram (T5's, XLM-R's) and SentencePiece-style BPE with byte fallback (Llama-2's,
Mistral's): the text cut into the words ``tokenizers`` would cut
(``beamtok._src.engines.word_cutters``, where each cut is stated and argued), each word's ids
computed once by the file's own model and cached.

Why a cache of words is exact: the model turns each word into pieces looking at that word
alone (WordPiece's greedy longest match, Unigram's best segmentation, BPE's merges), so a
word's ids depend on the word and nothing else; each word a batch of texts misses is given
to the file's model alone (its ``tokenize``, the call ``tokenizers`` makes per word), so no
piece is ever computed here. Words are cached as
the bytes of their int32 ids, and a text's ids are one ``bytes.join`` of its words', read as
an array without a Python int per token.
Where numba is installed, a Unigram model is compiled instead (``unigram_native``): it
segments every word by ``tokenizers``' own rules fast enough that no cache is kept; so
is a BPE whose words are its marked text cut before marks (``bpe_native``: the kernel cuts,
looks words up in its own cache and merges the new ones).
Texts holding an added token (``[CLS]`` or ``<s>`` written in the text) are cut at their
added tokens and the parts encoded here (``added_segments``; ``tokenizers`` encodes them
whole where its Metaspace marks the first part only); the tokens a post-processor puts
around a text are put around the ids,
as on the other fast paths. At load the encoder must give ``tokenizers``' ids on the probe
strings and a slice of the split sample, with and without special tokens, or it is refused
with the string that differs.
"""

from __future__ import annotations

import array
import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.engines.added_token_routing import EMPTY, AddedTokenRouting, refuse_unrouted_added_tokens
from beamtok._src.engines.cutter_choice import cutter_for
from beamtok._src.engines.exact_encoder import ExactEncoder, MissingExtra, added_around
from beamtok._src.engines.id_arrays import int32_ids
from beamtok._src.engines.tokenizer_parts import read_spec
from beamtok._src.engines.word_cutters import Marking

if TYPE_CHECKING:
    from beamtok._src.engines.bpe_native_encoder import NativeBPE
    from beamtok._src.engines.unigram_native import NativeUnigram

__all__ = ["CachedWordsEncoder", "CompiledBPEEncoder", "CompiledUnigramEncoder", "WordsEncoder"]

CACHED_WORDS = 1 << 20  # words kept before the cache starts over (a word's ids are a few bytes)
PROBE_STRIDE = 8  # every 8th string of the split sample (~10,000) is probed at load


class WordCache:
    """Word -> the bytes of its int32 ids. Each word missing from a batch of texts is given to
    the file's model alone (``model.tokenize``: what ``tokenizers`` runs on each word after its
    normalizer and pre-tokenizer, byte fallback and unknown pieces included), once; the cache
    starts over when full (keeping the words of the batch at hand). A call per word costs
    less than one ``encode`` of all the words as pre-tokenized splits (whose offsets and word
    ids are built for nothing). One thread encodes at a
    time: another's start-over would empty the cache between this one's learning and reading."""

    def __init__(self, model: Any) -> None:
        self.ids: dict[str, bytes] = {}
        self.model = model
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def encode(self, texts_words: list[list[str]]) -> list[np.ndarray]:
        """Each text's ids (a text given as its words; words not yet cached are learned
        first, all of a batch's together)."""
        if self._pid != os.getpid():  # forked while another thread may have held it: a lock of this process
            self._lock, self._pid = threading.Lock(), os.getpid()
        with self._lock:
            return self._encode(texts_words)

    def _encode(self, texts_words: list[list[str]]) -> list[np.ndarray]:
        ids_of = self.ids.__getitem__
        out: list[np.ndarray] = []
        pending: list[int] = []  # texts with a word not yet known
        for words in texts_words:
            try:
                out.append(np.frombuffer(b"".join(map(ids_of, words)), dtype=np.int32))
            except KeyError:
                pending.append(len(out))
                out.append(EMPTY)
        if pending:
            self.learn([texts_words[i] for i in pending])
            for i in pending:
                out[i] = np.frombuffer(b"".join(map(ids_of, texts_words[i])), dtype=np.int32)
        return out

    def learn(self, texts_words: list[list[str]]) -> None:
        """Make every word of these texts known."""
        ids = self.ids
        missing = {word for words in texts_words for word in words if word not in ids}
        if len(ids) + len(missing) > CACHED_WORDS:
            ids.clear()
            missing = {word for words in texts_words for word in words}
        tokenize = self.model.tokenize
        for word in missing:
            ids[word] = array.array("i", [token.id for token in tokenize(word)]).tobytes()


class WordsEncoder:
    """Encodes exactly like the given tokenizer by cutting words (see the module docstring);
    each word's ids come from the compiled kernel the subclass names (``KERNEL``), or from a
    cache of the file model's answers where it names none. The three engines are
    :class:`CompiledBPEEncoder`, :class:`CompiledUnigramEncoder` and :class:`CachedWordsEncoder`."""

    KERNEL: ClassVar[str | None] = None
    ENGINE: ClassVar[str] = "cached words"
    engine_name: str  # each engine's own
    native_refusal = ""  # why the compiled kernel does not run, where one was refused

    def __init__(
        self,
        tokenizer_json: str,
        name: str,
        family: str,
        reference: Any = None,
        spec: dict[str, Any] | None = None,
    ) -> None:
        """``reference``: the ``tokenizers.Tokenizer`` of ``tokenizer_json`` where the caller
        holds one; ``spec``: the text parsed, where the caller has parsed it (only read).
        ConfigError where this engine cannot be exact for the file (a kernel's
        engine also where its kernel cannot run: ``native_refusal`` says why)."""
        from beamtok._src.engines.byte_level_file import PROBES
        from beamtok._src.engines.split_patterns import split_sample

        self.family = family
        spec = read_spec(tokenizer_json) if spec is None else spec

        def refuse(why: str) -> ConfigError:
            return ConfigError(f"tokenizer {name!r} cannot use the exact fast path ({self.ENGINE}, {family}): {why}")

        model = spec.get("model") or {}
        if model.get("dropout"):
            raise refuse("its BPE model has dropout (random merges)")
        refuse_unrouted_added_tokens(spec, refuse)
        self.prefix, self.suffix = added_around(spec, name)
        self.routing: AddedTokenRouting | None = AddedTokenRouting(spec, tokenizer_json, name, reference)
        self.reference = self.routing.reference
        self._cutter = cutter_for(spec, self.reference, refuse)
        compiled_bpe = self._compiled_bpe(model, refuse) if self.KERNEL == "BPE" else None
        compiled_unigram = self._native_model(model, refuse) if self.KERNEL == "Unigram" else None
        if self.KERNEL is not None and compiled_bpe is None and compiled_unigram is None:
            raise refuse(self.native_refusal or f"its model is not a {self.KERNEL} this path compiles")
        self._words: WordCache | NativeUnigram = compiled_unigram or WordCache(self.reference.model)
        # the compiled engine that cuts marked texts itself (their words are cut before marks), if any
        self._encode_marked: Callable[[list[str], Marking | None], list[np.ndarray | None]] | None = None
        if compiled_bpe is not None:
            self._encode_marked = compiled_bpe.encode
        elif compiled_unigram is not None and (cut := self._cutter.native_cut) is not None:
            unigram, mark = compiled_unigram, self._cutter.mark
            self._encode_marked = lambda texts, marking: unigram.encode_marked(texts, cut, mark, marking)
        whole = ExactEncoder(self)
        whole.check_segments(name)
        whole.probe(name, [*PROBES, *split_sample()[::PROBE_STRIDE]])

    def _native_model(self, model: dict[str, Any], refuse: Callable[[str], ConfigError]) -> NativeUnigram | None:
        """A Unigram model compiled (``unigram_native``): it segments every word, with no
        cache. Without numba the engine is refused as a missing package (``MissingExtra``)."""
        if model.get("type") != "Unigram":
            return None
        try:
            from beamtok._src.engines.unigram_native import NativeUnigram
        except ImportError:
            missing = (
                "numba is not installed, so each new word goes to the file's Unigram model from Python; "
                "pip install 'beamtok[compiled]' segments words in compiled code"
            )
            raise MissingExtra(str(refuse(missing)), install="beamtok[compiled]") from None
        return NativeUnigram(model, self._ask_model)

    def _compiled_bpe(self, model: dict[str, Any], refuse: Callable[[str], ConfigError]) -> NativeBPE | None:
        """A BPE model compiled (``bpe_native``) where the cutter's words are its marked text
        cut before marks: it cuts and merges in one call. Without numba the engine is refused
        as a missing package (``MissingExtra``)."""
        if model.get("type") != "BPE" or self._cutter.native_cut is None:
            return None
        try:
            from beamtok._src.engines.bpe_native_encoder import NativeBPE
        except ImportError:
            missing = "numba is not installed: pip install 'beamtok[compiled]' compiles this BPE"
            raise MissingExtra(str(refuse(missing)), install="beamtok[compiled]") from None
        why = NativeBPE.why_not(model)
        if why is not None:
            self.native_refusal = f"{why}, which the compiled BPE does not follow"
            return None
        return NativeBPE(model, self._cutter.mark, self._cutter.native_cut)

    def encode_plain(self, texts: list[str]) -> list[np.ndarray]:
        """Texts holding no added token: cut into words, then their words' ids (a compiled
        BPE, and a compiled Unigram whose words are cut before marks, cut the marked texts
        themselves)."""
        if self._encode_marked is not None:
            marking = self._cutter.marking
            if marking is not None:  # the engine marks the normalized texts' code points
                normalized = self._cutter.normalized
                ids = self._encode_marked([normalized(text) for text in texts], marking)
            else:
                marked = self._cutter.marked
                ids = self._encode_marked([marked(text) for text in texts], None)
            return [one if one is not None else self._by_file(text) for one, text in zip(ids, texts)]
        cut = self._cutter.words
        return self._words.encode([cut(text) for text in texts])

    def _by_file(self, text: str) -> np.ndarray:
        """A text's ids from the file itself (where ``tokenizers`` raises, it raises here)."""
        return int32_ids(self.reference.encode(text, add_special_tokens=False).ids)

    def _ask_model(self, words: Sequence[str]) -> np.ndarray:
        """A text's ids, each word given to the file's model."""
        tokenize = self.reference.model.tokenize
        return np.array([token.id for word in words for token in tokenize(word)], dtype=np.int32)

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError(f"a {type(self).__name__} is rebuilt, not pickled (Tokenizer drops it when pickled)")


class CompiledBPEEncoder(WordsEncoder):
    """A SentencePiece-style BPE whose words are its marked text cut before marks, cut and
    merged in compiled code (``bpe_native``; numba)."""

    KERNEL = "BPE"
    ENGINE = "compiled BPE"
    engine_name = "beamtok compiled BPE on marked words"


class CompiledUnigramEncoder(WordsEncoder):
    """A Unigram model segmenting every cut word in compiled code (``unigram_native``;
    numba), with no cache."""

    KERNEL = "Unigram"
    ENGINE = "compiled Unigram"
    engine_name = "beamtok compiled Unigram on cut words"


class CachedWordsEncoder(WordsEncoder):
    """Each word's ids computed once by the file's own model and cached (no numba needed)."""

    engine_name = "beamtok cached words"
