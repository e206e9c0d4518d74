"""Progress of a local cache build, inside shards as well as across them.

A worker writing a shard (a thread of this process, or a ``multi_processing`` worker process)
reports how far it is into its input every half second, as a small JSON file in the local
directory named by ``BEAMTOK_PROGRESS_DIR``; the build sets that variable for local runs,
and worker processes inherit it. Remote workers (Dataflow, Flink, ...) never see it, and
report nothing. A range of a split file reports its share of the file in its own file. How
far a shard is comes from its doc cursor: the byte offset of
uncompressed JSONL against the file size, the row of Parquet and Arrow files against their
row count; a compressed file has no such measure and counts only when it finishes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

from beamtok._src.base.progress import Progress
from beamtok._src.cache.format.manifest import RECORDS_DIR
from beamtok._src.cache.format.storage import Storage
from beamtok._src.core.spec import SourceSpec
from beamtok._src.shards.items import DocItem, ShardCursor
from beamtok._src.sources.readers import is_compressed, source_format
from beamtok._src.sources.urls import Shard, is_remote, split_range

if TYPE_CHECKING:
    from beamtok._src.cache.build.ranges import InputRange

__all__ = ["PROGRESS_DIR_ENV", "BuildProgress", "ShardReporter", "shard_fraction"]

PROGRESS_DIR_ENV = "BEAMTOK_PROGRESS_DIR"


def shard_fraction(shard: Shard, source: SourceSpec) -> Callable[[int], float] | None:
    """How far into ``shard`` a doc cursor is, as a fraction; None when it cannot be told."""
    if shard.data is not None or is_remote(shard.url):
        return None
    url, first, stop = split_range(shard.location())
    fmt = source_format(url, source)
    try:
        if fmt == "jsonl" and not is_compressed(url):
            end = os.path.getsize(url) if stop is None else stop
        elif fmt in ("parquet", "arrow"):
            end = _row_count(url, fmt) if stop is None else stop
        else:
            return None
        return lambda cursor: min((cursor - first) / (end - first), 1.0) if end > first else 1.0
    except OSError:
        return None
    return None


def _row_count(path: str, fmt: str) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if fmt == "parquet":
        return int(pq.ParquetFile(path).metadata.num_rows)
    with pa.memory_map(path) as source:
        try:
            return int(pa.ipc.open_file(source).count_rows())
        except pa.ArrowInvalid:
            source.seek(0)
            return sum(batch.num_rows for batch in pa.ipc.open_stream(source))


class ShardReporter:
    """Worker side: writes one shard's progress (or one range's share of it) at most every
    ``interval`` seconds."""

    def __init__(
        self, directory: str, shard: Shard, source: SourceSpec, interval: float = 0.5, part: InputRange | None = None
    ) -> None:
        name = f"{shard.index}" if part is None else f"{shard.index}.{part.number}"
        self.path = os.path.join(directory, f"{name}.json")
        whole = shard_fraction(shard, source)
        if part is not None and whole is not None:
            # a range reports the share of the file it has read: from its start to the cursor
            self.fraction: Callable[[int], float] | None = lambda cursor: max(0.0, whole(cursor) - whole(part.start))
            self.done = whole(part.stop if part.stop is not None else part.total) - whole(part.start)
        else:
            self.fraction = whole
            self.done = 1.0
        self.interval = interval
        self._last = 0.0

    @classmethod
    def from_environment(cls, shard: Shard, source: SourceSpec, part: InputRange | None = None) -> ShardReporter | None:
        directory = os.environ.get(PROGRESS_DIR_ENV)
        return cls(directory, shard, source, part=part) if directory and os.path.isdir(directory) else None

    def documents(self, items: Iterable[DocItem]) -> Iterator[DocItem]:
        """Pass a range's tokenized documents through, reporting its progress."""
        tokens = documents = 0
        for item in items:
            documents += 1
            tokens += len(item.value) if item.value is not None else 0
            self(ShardCursor(0, item.cursor, 0), tokens, 0, documents)
            yield item
        self._last = 0.0
        self(ShardCursor(0, 0, 0, True), tokens, 0, documents)

    def __call__(self, cursor: ShardCursor, tokens: int, rows: int, documents: int) -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        if cursor.done:
            fraction: float | None = self.done
        else:
            fraction = self.fraction(cursor.doc) if self.fraction is not None else None
        report = {"fraction": fraction, "tokens": tokens, "rows": rows, "documents": documents}
        temporary = f"{self.path}.tmp-{os.getpid()}-{threading.get_ident()}"
        try:
            with open(temporary, "w", encoding="utf-8") as f:
                json.dump(report, f)
            os.replace(temporary, self.path)
        except OSError:
            pass  # progress is a convenience: a full or vanished directory must not fail a build


class BuildProgress(threading.Thread):
    """Parent side: shows shards done (with the fractions of open ones), tokens and rate."""

    def __init__(
        self,
        storage: Storage,
        total: int,
        directory: str,
        *,
        enabled: bool = True,
        stream: IO[str] | None = None,
        poll: float = 0.5,
    ) -> None:
        super().__init__(daemon=True)
        self.storage = storage
        self.total = total
        self.directory = directory
        self.poll = poll
        self._tokens: dict[str, int] = {}
        self.before = self._finished()
        self.started = time.monotonic()
        self.finished = threading.Event()
        self.display = Progress(total, "cache", "shards", enabled=enabled, stream=stream)

    def _finished(self) -> set[str]:
        """The sidecar names of finished shards."""
        return {name for name in self.storage.list(RECORDS_DIR) if name.endswith(".json")}

    def _sidecar_tokens(self, name: str) -> int:
        if name not in self._tokens:
            self._tokens[name] = int(json.loads(self.storage.read_bytes(f"{RECORDS_DIR}/{name}"))["tokens"])
        return self._tokens[name]

    def figures(self) -> tuple[float, int]:
        """Shards done (open shards count their fractions) and tokens written in this run."""
        finished = self._finished()
        tokens = sum(self._sidecar_tokens(name) for name in finished - self.before)
        done_indices = {int(name.removeprefix("shard-").removesuffix(".json")) for name in finished}
        done: float = len(done_indices)
        for name in os.listdir(self.directory):
            # "<shard>.json" from a whole shard, "<shard>.<range>.json" from a range of one
            if not name.endswith(".json") or int(name.split(".")[0]) in done_indices:
                continue
            try:
                with open(os.path.join(self.directory, name), encoding="utf-8") as f:
                    report = json.load(f)
            except (OSError, ValueError):
                continue  # being replaced right now
            tokens += report["tokens"]
            done += report["fraction"] or 0.0
        return done, tokens

    def show(self) -> None:
        done, tokens = self.figures()
        rate = tokens / max(time.monotonic() - self.started, 1e-9)
        self.display.set(
            done,
            tokens=f"{tokens:,}",
            rate=f"{rate / 1e6:.2f}M tokens/s" if rate >= 1e5 else f"{rate / 1e3:.1f}K tokens/s",
        )

    def run(self) -> None:
        while not self.finished.wait(self.poll):
            self.show()

    def stop(self) -> dict[str, Any]:
        """Stop polling, show the final figures; return them."""
        self.finished.set()
        if self.is_alive():
            self.join()
        self.show()
        self.display.close()
        done, tokens = self.figures()
        return {"shards": done, "tokens": tokens, "seconds": time.monotonic() - self.started}
