r"""How ``tokenizers`` cuts a text into the words its model encodes one by one, reproduced
where that can be stated whole, for the cached-words engine (``beamtok._src.engines.cached_words``).

``tokenizers`` encodes in three parts: the normalizer maps the whole text, the pre-tokenizer
cuts the normalized text into words, the model encodes each word looking at that word alone.
A cutter gives the words of a text; the normalizer is always the file's own
(``normalize_str``, native code), except two cases stated here and below. An ASCII text under
a ``Precompiled`` normalizer (SentencePiece's character map: T5's, XLM-R's) or one of the
Unicode normal forms is mapped by a table of what the normalizer makes of each ASCII character
alone (``AsciiTable``): ``Precompiled`` maps each grapheme on its own (the whole grapheme if
the map holds it, else each character), an ASCII text's graphemes are its characters but for
``\r\n``, which is one, and a normal form leaves ASCII as it is; so the text is cut at
``\r\n``, its parts translated and joined by what the normalizer makes of ``\r\n``. A text
that is not all ASCII is normalized line by line (``AsciiTable.mixed``): its ASCII lines by
the table, the others by the file's normalizer, since a line starts after a newline, where a
grapheme always ends and a normal form's composition and reordering stop (a newline is a
starter that composes with nothing).

- :class:`BertWords` (``BertPreTokenizer``). On an ASCII string it cuts at whitespace (tab,
  newline, vertical tab, form feed, carriage return, space: Rust's ``char::is_whitespace`` on
  ASCII) and isolates every ASCII punctuation character (``!`` to ``/``, ``:`` to ``@``,
  ``[`` to `````, ``{`` to ``~``: ``is_ascii_punctuation``); any other run of characters
  (letters, digits, the remaining controls) is a word: one regular expression. Under
  ``BertNormalizer(clean_text=True)`` an ASCII text is normalized here too: NUL and the
  ASCII controls other than tab, newline and carriage return are deleted, those three become
  spaces, and A-Z are lowered when ``lowercase`` is set (accent stripping and the spacing of
  Chinese characters do nothing to ASCII): one ``str.translate``, by the table of what the
  normalizer makes of each ASCII character alone (``AsciiTable``; BertNormalizer maps
  character by character, ``\r\n`` included). A normalized text that is
  not ASCII is cut by the file's own pre-tokenizer (``pre_tokenize_str``). Under
  ``BertNormalizer``, which maps each character on its own (deleting, spacing, lowering or
  decomposing it; a newline is a starter, so decomposition does not reach across it), a text
  that is not ASCII is taken line by line: a newline is whitespace to the normalizer and the
  pre-tokenizer alike, so no word spans two lines, and each ASCII line takes the ASCII way.
- :class:`MetaspaceWords` (``Metaspace``, ``split`` true): every space (U+0020 only) becomes
  the replacement character ``▁``, which is put in front of a text that does not start with
  it (``prepend_scheme`` ``always``, or ``first``: the same for a text that holds no added
  token, and texts that do are encoded by ``tokenizers`` itself), and the text is cut before
  each ``▁``: pure string operations, for any text.
  A ``Metaspace`` that does not split (Llama-2's form as ``transformers`` writes it) marks
  the text the same way and leaves it one word: it is cut as ``SpaceMarkWords`` cuts, below,
  where that argument holds.
- :class:`WhitespaceMetaspaceWords` (a ``Sequence`` of ``WhitespaceSplit`` then ``Metaspace``
  with ``split`` true, T5's form, as its files ship and as ``transformers`` writes them):
  ``WhitespaceSplit`` cuts the normalized text at every run of whitespace, which it drops
  (Rust's ``char::is_whitespace``: the Unicode White_Space characters, listed in
  ``WHITE_SPACE``; not Python's ``str.split``, which also cuts at U+001C to U+001F), then
  ``Metaspace`` takes each part alone as above: it holds no U+0020 left to replace, gets ``▁``
  in front unless it starts with it (``prepend_scheme`` ``always``; ``never`` leaves it), and
  is cut before each ``▁``. ``first`` is refused: whether a part counts as first depends on
  offsets this cut does not keep.
- :class:`SpaceMarkWords` (no pre-tokenizer: ``Prepend``/``Replace`` normalizers write the
  ``▁`` themselves and the model sees the whole text as one word). The text is cut before
  each ``▁`` that follows another character than ``▁``, which cannot change the model's
  result when no piece of the vocabulary holds a character other than ``▁`` followed by
  ``▁``: a BPE merge or a Unigram piece spanning a cut would be such a piece, so none spans
  one; BPE then merges each part as it would alone (the pair of lowest rank in the whole
  text is the lowest in its part). Unigram is refused: its best segmentation of the whole
  is the best of each part only in exact arithmetic; in float64 the score of the text
  before a part shifts the part's sums, and a tie there (a run of ``-`` is ``--`` and ``-``
  in either order at equal score) is broken otherwise than in the part alone.
  A vocabulary with such a piece is refused (``SpaceMarkWords.why_not``), as is a BPE that
  takes a word found whole in the vocabulary as one piece (``ignore_merges``: it would then
  apply to parts instead of the whole text). A ``Split`` pre-tokenizer on one character that
  the normalizers have replaced everywhere is no pre-tokenizer at all (``inert_split``:
  Gemma's files as ``transformers`` 5 writes them replace every space with ``▁``, then split
  on spaces, of which none is left). It stays inert only while no later normalizer step can
  write that character again: a ``Prepend`` or ``Replace`` whose text does not hold it;
  any other step (a Unicode normal form turns a no-break space into a space) ends it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from beamtok._src.base.errors import ConfigError
from beamtok._src.engines.normal_forms import normal_form_of
from beamtok._src.engines.quick_normalizers import AsciiTable, StringSteps

Refuse = Callable[[str], ConfigError]

__all__ = [
    "CUT_BEFORE_EVERY_MARK",
    "CUT_BEFORE_MARK_AFTER_OTHER",
    "MARK",
    "NO_CUT",
    "BertWords",
    "MetaspaceWords",
    "Refuse",
    "SpaceMarkWords",
    "WhitespaceMetaspaceWords",
    "WordCutter",
]

# BertPreTokenizer on ASCII: a run of characters that are neither whitespace nor punctuation, or one punctuation character
ASCII_WORDS = re.compile(r"[^\t\n\x0b\x0c\r !-/:-@\[-`{-~]+|[!-/:-@\[-`{-~]")
MARK = "\u2581"  # ▁
SPANNING = re.compile(f"[^{MARK}]{MARK}")  # another character followed by ▁
INFORMATION_SEPARATORS = re.compile("[\x1c-\x1f]")  # whitespace to str.split(), not to Rust
# how a compiled engine cuts a marked text into words (``WordCutter.native_cut``)
CUT_BEFORE_EVERY_MARK = 0
CUT_BEFORE_MARK_AFTER_OTHER = 1
NO_CUT = 2
# Unicode White_Space, what Rust's char::is_whitespace (WhitespaceSplit's cut) answers true for
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
WHITE_SPACE_WORDS = re.compile(f"[^{WHITE_SPACE}]+").findall


def white_space_parts(text: str) -> list[str]:
    """``WhitespaceSplit``'s parts of ``text``: ``str.split()`` (faster than the regex) where
    the text holds none of U+001C to U+001F, which it cuts at and Rust does not."""
    return WHITE_SPACE_WORDS(text) if INFORMATION_SEPARATORS.search(text) else text.split()


class SpaceMarking(NamedTuple):
    """How ``Metaspace`` marks a normalized text: each space becomes ``mark``, and with
    ``first`` the mark is put before a text that does not then start with it (an empty text
    stays empty)."""

    mark: str
    first: bool

    @property
    def code(self) -> int:
        return ord(self.mark)

    def marks_first(self, texts: Sequence[str]) -> list[bool]:
        """Whether each text gets the mark put first."""
        mark = self.mark
        return [bool(text) and text[0] != " " and text[0] != mark for text in texts]

    def apply(self, text: str) -> str:
        """``text`` marked, as a string."""
        if not text:
            return ""
        marked = text.replace(" ", self.mark)
        return self.mark + marked if self.first and not marked.startswith(self.mark) else marked


class WordsMarking(NamedTuple):
    """How ``WhitespaceSplit`` then a prepending ``Metaspace`` mark a normalized text: its
    words (runs of characters outside Unicode White_Space, Rust's ``is_whitespace``) one
    after another, each behind ``mark`` unless it starts with it."""

    mark: str

    @property
    def code(self) -> int:
        return ord(self.mark)

    def apply(self, text: str) -> str:
        """``text`` marked, as a string: the words joined by spaces, then every space before a
        mark dropped and every other one made a mark (one pass of string operations)."""
        words = white_space_parts(text)
        if not words:
            return ""
        mark = self.mark
        return (" " + " ".join(words)).replace(" " + mark, mark).replace(" ", mark)


Marking = SpaceMarking | WordsMarking


class WordCutter:
    """Cuts a text into the words ``tokenizers`` would give its model. A cutter whose words
    are its ``marked`` text cut before marks says how (``native_cut``, ``mark``), so that a
    compiled engine can cut the marked text itself; where that text is the normalized one
    marked by ``Metaspace`` alone, ``marking`` says so, and the engine marks it too."""

    native_cut: int | None = None
    mark = MARK
    marking: Marking | None = None

    def __init__(self, reference: Any) -> None:
        self.normalizer = reference.normalizer
        # a normal form alone is made by Python where it is tokenizers' (far cheaper than calling the normalizer)
        self.normal_form = normal_form_of(self.normalizer)
        taken = self.normal_form is None and AsciiTable.takes(self.normalizer)
        self.ascii = AsciiTable(self.normalizer) if taken else None
        self.string_steps: StringSteps | None = None  # set by cutter_for where the normalizer is only those

    def normalized(self, text: str) -> str:
        if self.string_steps is not None:
            return self.string_steps(text)
        if self.normal_form is not None:
            return self.normal_form(text)
        if self.ascii is not None:
            return self.ascii(text) if text.isascii() else self.ascii.mixed(text, self.normalizer.normalize_str)
        return self.normalizer.normalize_str(text) if self.normalizer is not None else text

    def words(self, text: str) -> list[str]:
        raise NotImplementedError

    def marked(self, text: str) -> str:
        """The text as the model's words are cut from it (where ``native_cut`` is set)."""
        raise NotImplementedError


class BertWords(WordCutter):
    """``BertPreTokenizer``'s words (see the module docstring)."""

    def __init__(self, reference: Any, normalizer: dict[str, Any]) -> None:
        super().__init__(reference)
        self.pre_tokenizer = reference.pre_tokenizer
        self.translate: dict[int, str] | None = None
        if normalizer.get("type") == "BertNormalizer" and normalizer.get("clean_text", True):
            self.translate = AsciiTable(reference.normalizer).table

    def words(self, text: str) -> list[str]:
        if self.translate is None:
            return self._cut(self.normalized(text))
        if text.isascii():
            return ASCII_WORDS.findall(text.translate(self.translate))
        # BertNormalizer maps each character on its own, and a newline is whitespace to both
        # parts: the text is cut line by line, so one accented name leaves the rest ASCII
        words: list[str] = []
        for line in text.split("\n"):
            words += (
                ASCII_WORDS.findall(line.translate(self.translate))
                if line.isascii()
                else self._cut(self.normalized(line))
            )
        return words

    def _cut(self, normalized: str) -> list[str]:
        if normalized.isascii():
            return ASCII_WORDS.findall(normalized)
        return [word for word, _ in self.pre_tokenizer.pre_tokenize_str(normalized)]


class MetaspaceWords(WordCutter):
    """``Metaspace``'s words (see the module docstring)."""

    def __init__(self, reference: Any, replacement: str, prepend: bool, split: bool = True) -> None:
        super().__init__(reference)
        self.replacement = self.mark = replacement
        self.prepend = prepend
        self.marking: SpaceMarking = SpaceMarking(replacement, prepend)
        mark = re.escape(replacement)
        if split:  # before every mark
            self.cut = re.compile(f"{mark}[^{mark}]*|[^{mark}]+").findall
            self.native_cut = CUT_BEFORE_EVERY_MARK
        else:  # one word to tokenizers, cut before a mark after another character (SpaceMarkWords)
            self.cut = re.compile(f"{mark}*[^{mark}]+|{mark}+").findall
            self.native_cut = CUT_BEFORE_MARK_AFTER_OTHER

    def words(self, text: str) -> list[str]:
        return self.cut(self.marked(text))

    def marked(self, text: str) -> str:
        return self.marking.apply(self.normalized(text))


class WhitespaceMetaspaceWords(WordCutter):
    """``WhitespaceSplit`` then ``Metaspace``'s words (see the module docstring). Python's
    ``str.split()`` cuts at White_Space and at U+001C to U+001F: on a text without those four it
    gives ``WhitespaceSplit``'s parts, which are joined by single spaces so that one pass of
    string operations marks and cuts them all; a text with one is cut by ``WHITE_SPACE``. A
    compiled engine marks the words on the text's code points instead (``marking``, where
    ``prepend``): a third of T5's engine went to these string operations on code."""

    def __init__(self, reference: Any, replacement: str, prepend: bool) -> None:
        super().__init__(reference)
        mark = re.escape(replacement)
        self.replacement = self.mark = replacement
        self.prepend = prepend
        self.cut = re.compile(f"{mark}[^ {mark}]*" if prepend else f"[^ {mark}]+|{mark}[^ {mark}]*").findall
        if prepend:  # the joined parts hold no space and start with a mark: cut before every mark
            self.native_cut = CUT_BEFORE_EVERY_MARK
            self.marking = WordsMarking(replacement)

    def words(self, text: str) -> list[str]:
        return self.cut(self.marked(text))

    def marked(self, text: str) -> str:
        """The parts joined, by spaces, or each behind its mark where ``prepend`` (then
        ``native_cut`` is set: the cut is before every mark)."""
        normalized = self.normalized(text)
        if self.marking is not None:
            return self.marking.apply(normalized)
        return " ".join(white_space_parts(normalized))


class SpaceMarkWords(WordCutter):
    """Words of a text the normalizers mark with ``▁`` and no pre-tokenizer cuts (see the
    module docstring)."""

    PATTERN = f"{MARK}*[^{MARK}]+|{MARK}+"
    cut = re.compile(PATTERN).findall
    native_cut = CUT_BEFORE_MARK_AFTER_OTHER

    def words(self, text: str) -> list[str]:
        return self.cut(self.normalized(text))

    def marked(self, text: str) -> str:
        return self.normalized(text)

    @staticmethod
    def why_not(model: dict[str, Any]) -> str | None:
        """Why a model given no pre-tokenizer cannot have its text cut into these words without
        changing the pieces (None: it can)."""
        if model.get("type") == "Unigram":
            return "its Unigram model segments the whole text at once, and its float sums of a part's scores depend on the text before it (ties break otherwise)"
        if model.get("ignore_merges"):
            return "its BPE takes a word found whole in the vocabulary as one piece (ignore_merges), and with no pre-tokenizer the word is the whole text"
        vocab = model.get("vocab")
        pieces = vocab.keys() if isinstance(vocab, dict) else (entry[0] for entry in vocab or [])
        spanning = next((p for p in pieces if SPANNING.search(p)), None)
        if spanning is not None:
            return f"its vocabulary holds {spanning!r}, a piece across a space: the text cannot be cut into words without changing the pieces"
        return None
