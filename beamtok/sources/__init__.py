"""Reading: URL expansion, format readers and doc cursors."""

from beamtok.sources.documents import ParseFailure, RawDocument, SkipReason, parse_json_line
from beamtok.sources.readers import detect_format, open_url, read_documents
from beamtok.sources.urls import Shard, expand_urls

__all__ = [
    "ParseFailure",
    "RawDocument",
    "Shard",
    "SkipReason",
    "detect_format",
    "expand_urls",
    "open_url",
    "parse_json_line",
    "read_documents",
]
