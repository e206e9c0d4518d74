"""A short timed race at set-up: an exact engine is taken only where it encodes faster than
``tokenizers`` itself.

Every engine :func:`~beamtok._src.engines.engine_choice.choose` can take gives the ids of
``tokenizers``, but not always sooner: an engine's speed depends on the file (a normalizer it
runs pass by pass, pieces it cannot cache) and on the text (scripts outside ASCII, long
numbers), in ways a table of measurements on a few files would miss. So a built engine is
timed against ``tokenizers`` on :func:`race_texts`, text of several kinds (English prose,
code, numbers, accented Latin, Cyrillic, Greek, Chinese, Japanese, Korean, Arabic, Hindi,
emoji), in turns, each side's best of three; an engine slower than ``tokenizers`` is refused
and the next candidate raced, so a file never runs on an engine slower than the library it
wraps. ``tokenizers`` is timed on one thread, one text a call, as the engines run.

The race is short (``docs/performance.md`` gives its cost). ``BEAMTOK_ENGINE_RACE=0`` turns it off
(the first engine that is exact is taken): the tests set it, since which engine wins a race
depends on the machine's load, where the ids never do.
"""

from __future__ import annotations

import functools
import os
import random
import time
from typing import Any

__all__ = ["RACE_ENV", "race_on", "race_texts", "slower_than_tokenizers"]

RACE_ENV = "BEAMTOK_ENGINE_RACE"
ROUNDS = 3

_KINDS = (
    "The committee met on Tuesday to discuss the budget, and after a long debate the members "
    "agreed that the library would stay open until nine o'clock in the evening during exams.",
    "def merge(left, right):\n    out = []\n    while left and right:\n        out.append((left "
    "if left[0] <= right[0] else right).pop(0))\n    return out + left + right  # stable\n",
    "Q3 revenue: 1,284,905.17 USD (+12.4%); units 48213, returns 1907; ratio 0.03955 at 23:59:59 on 30.11.26.",
    "Die Straße war naß, aber Jürgen fuhr trotzdem. L'été dernier, Élodie a visité Ærø et Göteborg.",
    "Вчера вечером мы долго гуляли по набережной и обсуждали новые книги, прочитанные за лето.",
    "Η θάλασσα ήταν ήρεμη το πρωί, και οι ψαράδες ετοίμαζαν τα δίχτυα τους στο λιμάνι.",
    "我们昨天在图书馆里讨论了这个问题，大家都认为应该先收集更多的数据再做决定。",
    "昨日は雨が降っていたので、家で本を読んだり、カレーを作ったりしました。",
    "어제는 친구들과 함께 공원에서 산책을 하고 저녁에는 맛있는 음식을 먹었습니다.",
    "ذهبنا إلى السوق صباح يوم الجمعة واشترينا الخضروات والفواكه الطازجة.",
    "कल शाम हम सब दोस्त मिलकर बाज़ार गए और वहाँ से कुछ किताबें खरीदीं।",
    "Launch day 🚀🎉 — thanks all!! 👍🏽 see you at https://example.org/path?q=1&x=%20 …",
)


@functools.lru_cache(maxsize=1)
def race_texts() -> tuple[str, ...]:
    """The texts an engine races ``tokenizers`` on: 48 of about a kilobyte, each the passages
    of every kind in a seeded order, from a seeded word on."""
    rng = random.Random(20261207)
    texts = []
    for _ in range(48):
        passages = rng.sample(_KINDS, len(_KINDS))
        words = " ".join(passages).split(" ")
        start = rng.randrange(len(words) // 4)
        texts.append(" ".join(words[start:]))
    return tuple(texts)


def race_on() -> bool:
    """Whether engines are raced against ``tokenizers`` (``BEAMTOK_ENGINE_RACE`` not ``0``)."""
    return os.environ.get(RACE_ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def slower_than_tokenizers(encoder: Any, reference: Any) -> str | None:
    """Why ``encoder`` is not taken, where it encodes :func:`race_texts` slower than
    ``reference`` (a ``tokenizers.Tokenizer``) does; None where it is as fast or faster.

    Args:
        encoder: A built engine (``encode_batch(texts, add_special_tokens)``).
        reference: The file as ``tokenizers`` loaded it.
    """
    texts = list(race_texts())
    encoder.encode_batch(texts[:2], False)  # the first call may compile or fill tables
    reference.encode_batch_fast(texts[:2], add_special_tokens=False)
    best_engine = best_file = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        encoder.encode_batch(texts, False)
        middle = time.perf_counter()
        for text in texts:  # one text a call: tokenizers on one thread, as the engine runs
            reference.encode_batch_fast([text], add_special_tokens=False)
        end = time.perf_counter()
        best_engine, best_file = min(best_engine, middle - start), min(best_file, end - middle)
    if best_engine <= best_file:
        return None
    return (
        f"it encodes {best_file / best_engine:.2f}x as fast as tokenizers on one thread on the set-up race "
        "(prose, code, numbers and eleven scripts), so tokenizers is faster"
    )
