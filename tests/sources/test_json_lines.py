"""JSONL parsing: the fast parser gives exactly what the standard library gives, on any line."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from beamtok._src.sources.documents import ParseFailure, _parse_json_line_exactly, parse_json_line

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)  # past 64 bits orjson would make floats
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.sampled_from(["\ud800", "a\udfffb", "\x00", "\u2028"])  # lone surrogates: json reads them, orjson refuses
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)
records = st.dictionaries(st.sampled_from(["text", "id", "meta", "score"]), values, min_size=1)


def line_of(record: object, ascii_only: bool) -> bytes:
    return json.dumps(record, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass") + b"\n"


def same(line: bytes) -> None:
    fast, exact = parse_json_line(line), _parse_json_line_exactly(line)
    if isinstance(exact, ParseFailure):
        assert fast == exact
    else:  # repr tells 1 from 1.0 and -0.0 from 0.0, and compares NaN
        assert repr(fast) == repr(exact)


@settings(max_examples=400, deadline=None)
@given(records, st.booleans())
def test_any_record_reads_as_json_reads_it(record: object, ascii_only: bool) -> None:
    same(line_of(record, ascii_only))


@settings(max_examples=400, deadline=None)
@given(records, st.booleans(), st.integers(min_value=0), st.binary(max_size=3), st.integers(min_value=0, max_value=3))
def test_damaged_lines_fail_or_read_as_json_does(
    record: object, ascii_only: bool, where: int, inserted: bytes, cut: int
) -> None:
    line = line_of(record, ascii_only)
    at = where % len(line)
    same(line[:at] + inserted + line[at + cut :])


def test_the_cases_the_two_parsers_read_differently() -> None:
    for line in [
        b'{"id": 123456789012345678901234567890, "text": "a"}',  # orjson: a float
        b'{"meta": {"deep": [1, 2.5]}, "text": "a"}',
        b'{"text": "\\ud800"}',  # orjson refuses, json reads a lone surrogate
        b'{"score": NaN, "text": "a"}',
        b'\xef\xbb\xbf{"text": "a"}',
        b'{"text": "caf\xc3"}',
        b"[1, 2]",
        b'{"text": "a"} x',
        b"[" * 2000 + b"]" * 2000,
    ]:
        assert repr(parse_json_line(line)) == repr(_parse_json_line_exactly(line)), line[:60]
    assert parse_json_line(b'{"id": 123456789012345678901234567890}') == {"id": 123456789012345678901234567890}
    assert isinstance(parse_json_line(b'{"id": 123456789012345678901234567890}')["id"], int)
    deep = parse_json_line(b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}")
    assert isinstance(deep, ParseFailure) and "nested deeper" in deep.message
