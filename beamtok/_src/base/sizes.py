"""Ceilings for size-like options, and the memory a size would take, checked when the option
is given: a typo such as ``seq_len=1000000000`` is refused with what it would need, instead of
growing a process until the kernel kills it."""

from __future__ import annotations

from beamtok._src.base.errors import ConfigError

__all__ = [
    "MAX_BATCH_ROWS",
    "MAX_BLOCK",
    "MAX_OPEN_SHARDS",
    "MAX_SEQ_LEN",
    "MAX_WINDOW",
    "MAX_WORKERS",
    "ROW_BYTES_PER_TOKEN",
    "check_ceiling",
    "check_memory",
    "human_bytes",
    "memory_available",
]

MAX_SEQ_LEN = 1 << 24  # tokens in one row: 16.8 M, far past any trained context; a row of it is 218 MB
MAX_BATCH_ROWS = 1 << 20
MAX_WINDOW = 1 << 24  # examples held by a shuffle window or a packing window
MAX_BLOCK = 1 << 20  # examples in one block of a mix
MAX_OPEN_SHARDS = 1 << 16
MAX_WORKERS = 1024
ROW_BYTES_PER_TOKEN = 13  # input_ids, segment_ids, position_ids (int32) and loss_mask (int8)


def human_bytes(count: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if count < 1000 or unit == "TB":
            return f"{count:,.0f} {unit}" if unit == "bytes" else f"{count:,.1f} {unit}"
        count /= 1000
    raise AssertionError("unreachable")


def memory_available() -> int | None:
    """Bytes of memory available to new allocations (Linux ``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_ceiling(value: int, name: str, ceiling: int, unit: str, *, bytes_each: int | None = None) -> int:
    """``value`` if it is at most ``ceiling`` (``bytes_each``: what one unit of it takes, to say
    what the value would need)."""
    if value > ceiling:
        need = f" (it would need {human_bytes(value * bytes_each)})" if bytes_each else ""
        raise ConfigError(f"{name} {value:,} is above the ceiling of {ceiling:,} {unit}{need}; is it a typo?")
    return value


def check_memory(what: str, need: int) -> None:
    """Refuse ``what`` when it needs more memory than the machine has available now."""
    available = memory_available()
    if available is not None and need > available:
        raise ConfigError(
            f"{what} would need {human_bytes(need)} of memory; this machine has {human_bytes(available)} available"
        )


ROW_GROUP_BYTES = 8 << 20  # tokens per row group: small enough to seek to, big enough to read fast


def default_group_rows(seq_len: int | None, nbytes: int | None = None) -> int:
    """Rows in a cache's row group when the build is not told: as many rows as fit ``nbytes``
    of int32 tokens (default ROW_GROUP_BYTES), at least 64."""
    return max(64, (nbytes or ROW_GROUP_BYTES) // (4 * (seq_len or 2048)))
