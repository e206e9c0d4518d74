"""The word cache the compiled BPE kernels share (``bpe_native``, ``byte_level_native``): a
word's code points -> its ids, in an open-addressing table of numpy arrays that a kernel reads
and writes without the GIL. Keys and ids live in two arenas; when the table is half full or
an arena is short, the cache starts over. One call at a time writes a cache (the kernels'
``Workspaces`` see to it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from beamtok._src.engines.compiled_tables import compiled

__all__ = ["CACHED_CHARS", "cache_find", "cache_put", "new_word_cache", "word_hash"]

CACHED_CHARS = 64  # longer words are merged each time (tokenizers caches words under 256 bytes)
KEY_ARENA = 1 << 21  # characters of the cached words
ID_ARENA = 1 << 20  # ids of the cached words
_FNV_PRIME = np.uint64(0x100000001B3)
_FNV_START = np.uint64(0xCBF29CE484222325)
_SPREAD = 0x9E3779B1


def new_word_cache(bits: int) -> tuple[Any, ...]:
    """An empty word cache of ``2**bits`` slots (it holds at most half as many words): slots,
    each entry's hash, key and ids (where they start, how long), the arenas of keys and ids,
    and what is used of entries and arenas."""
    slots = 1 << bits
    return (
        np.full(slots, -1, dtype=np.int64),
        *(np.zeros(slots // 2, dtype=np.int64) for _ in range(5)),
        np.zeros(KEY_ARENA, dtype=np.uint32),
        np.zeros(ID_ARENA, dtype=np.int64),
        np.zeros(3, dtype=np.int64),
    )


@compiled
def word_hash(chars: np.ndarray, a: int, b: int) -> int:  # pragma: no cover - compiled
    """FNV-1a of ``chars[a:b]``, non-negative."""
    h = _FNV_START
    for k in range(a, b):
        h = (h ^ np.uint64(chars[k])) * _FNV_PRIME
    return np.int64(h >> np.uint64(1))


@compiled
def cache_find(
    cache: tuple[Any, ...], chars: np.ndarray, a: int, b: int, h: int, out: np.ndarray, at: int
) -> int:  # pragma: no cover - compiled
    """Writes the cached ids of the word ``chars[a:b]`` (hash ``h``) at ``out[at:]``: how
    many, or -1 where the word is not cached."""
    slots, entry_hash, key_start, key_len, id_start, id_len, key_arena, id_arena, _used = cache
    mask = slots.shape[0] - 1
    s = (h * _SPREAD) & mask
    while slots[s] != -1:
        e = slots[s]
        if entry_hash[e] == h and key_len[e] == b - a:
            same = True
            for k in range(b - a):
                if key_arena[key_start[e] + k] != chars[a + k]:
                    same = False
                    break
            if same:
                for k in range(id_len[e]):
                    out[at + k] = id_arena[id_start[e] + k]
                return id_len[e]
        s = (s + 1) & mask
    return -1


@compiled
def cache_put(
    cache: tuple[Any, ...], chars: np.ndarray, a: int, b: int, h: int, ids: np.ndarray, at: int, count: int
) -> None:  # pragma: no cover - compiled
    """Caches ``ids[at:at + count]`` as the ids of the word ``chars[a:b]`` (hash ``h``, not
    cached yet), starting the cache over first where it is full."""
    slots, entry_hash, key_start, key_len, id_start, id_len, key_arena, id_arena, used = cache
    mask = slots.shape[0] - 1
    if used[0] >= slots.shape[0] // 2 or used[1] + (b - a) > key_arena.shape[0] or used[2] + count > id_arena.shape[0]:
        slots[:] = -1  # full: start over
        used[:] = 0
    s = (h * _SPREAD) & mask
    while slots[s] != -1:
        s = (s + 1) & mask
    e = used[0]
    entry_hash[e] = h
    key_start[e], key_len[e] = used[1], b - a
    id_start[e], id_len[e] = used[2], count
    key_arena[used[1] : used[1] + (b - a)] = chars[a:b]
    id_arena[used[2] : used[2] + count] = ids[at : at + count]
    used[0] += 1
    used[1] += b - a
    used[2] += count
    slots[s] = e
