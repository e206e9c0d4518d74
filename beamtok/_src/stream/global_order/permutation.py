"""A keyed pseudo-random permutation of 0..n-1, computed, never stored.

A balanced Feistel network over the smallest even number of bits covering ``n`` is a
bijection of ``0..2**bits-1``; cycle walking (apply it again while the value is ``>= n``)
turns it into a bijection of ``0..n-1``, at under 4 applications per index on average. The
round function mixes (key, round, half) with SplitMix64's finalizer. It is never a linear
congruential generator: those keep sorted inputs visibly ordered. Vectorized with numpy, so a
block of positions costs a few array operations.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["FeistelPermutation"]

ROUNDS = 6
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer: a fast, well-spread hash of 64-bit words."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


class FeistelPermutation:
    """``perm[i]`` for ``i`` in ``0..n-1``: a bijection chosen by ``key`` (a sequence of ints)."""

    def __init__(self, n: int, key: tuple[int, ...]) -> None:
        if n < 1:
            raise ValueError("a permutation needs n >= 1")
        self.n = n
        bits = max(2, (n - 1).bit_length())
        self.half = (bits + 1) // 2
        self.mask = np.uint64((1 << self.half) - 1)
        seed = np.uint64(0)
        with np.errstate(over="ignore"):
            for part in key:
                seed = _mix(seed ^ (np.uint64(part & 0xFFFFFFFFFFFFFFFF) + _GOLDEN))
            self.round_keys = [_mix(seed + np.uint64(r + 1) * _GOLDEN) for r in range(ROUNDS)]

    def _once(self, x: np.ndarray) -> np.ndarray:
        shift = np.uint64(self.half)
        left, right = x >> shift, x & self.mask
        with np.errstate(over="ignore"):
            for k in self.round_keys:
                left, right = right, left ^ (_mix(right ^ k) & self.mask)
        return (left << shift) | right

    def __call__(self, positions: np.ndarray | int) -> np.ndarray:
        """The images of ``positions`` (each in ``0..n-1``)."""
        return self._walk(positions, self._once)

    def inverse(self, images: np.ndarray | int) -> np.ndarray:
        """The positions whose images are ``images`` (each in ``0..n-1``): the rounds undone in
        reverse order, walking the cycle back while the value is ``>= n``."""
        return self._walk(images, self._undo)

    def _walk(self, values: np.ndarray | int, step: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``step`` applied to each value, again while the result is ``>= n`` (cycle walking)."""
        x = np.atleast_1d(np.asarray(values, dtype=np.uint64)).copy()
        todo = np.arange(len(x))
        while len(todo):
            x[todo] = step(x[todo])
            todo = todo[x[todo] >= np.uint64(self.n)]
        return x.astype(np.int64)

    def _undo(self, x: np.ndarray) -> np.ndarray:
        shift = np.uint64(self.half)
        left, right = x >> shift, x & self.mask
        with np.errstate(over="ignore"):
            for k in reversed(self.round_keys):
                left, right = right ^ (_mix(left ^ k) & self.mask), left
        return (left << shift) | right
