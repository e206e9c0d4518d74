"""Thrift's compact protocol, read and written without a schema (what Parquet footers use).

A struct decodes to a list of :class:`Field` (id, wire type, value) in the order written, so
encoding it again gives back the same bytes: field headers use the short delta form whenever
the id is 1 to 15 above the previous one, as every Thrift writer does. Values: ints for the
integer types, ``bool`` for booleans, ``float`` for doubles, ``bytes`` for binary/strings,
:class:`ThriftList` for lists and sets, :class:`ThriftMap` for maps, a list of fields for
structs. Only what a Parquet footer holds needs to round-trip; anything malformed raises
``ValueError``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

__all__ = ["Field", "ThriftList", "ThriftMap", "decode_struct", "encode_struct", "field_value", "set_field"]

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
_INTS = (BYTE, I16, I32, I64)


@dataclass
class Field:
    """One field of a struct: its id, its wire type and its value."""

    id: int
    type: int
    value: Any


@dataclass
class ThriftList:
    """A list or set (``kind`` LIST or SET) of elements of one wire type."""

    kind: int
    element_type: int
    items: list[Any]


@dataclass
class ThriftMap:
    key_type: int
    value_type: int
    items: list[tuple[Any, Any]]


def field_value(fields: list[Field], field_id: int) -> Any:
    """The value of field ``field_id`` (None when absent)."""
    for f in fields:
        if f.id == field_id:
            return f.value
    return None


def set_field(fields: list[Field], field_id: int, value: Any) -> None:
    """Replace the value of a field that is present (its wire type stays)."""
    for f in fields:
        if f.id == field_id:
            f.value = value
            return
    raise ValueError(f"field {field_id} is not in this struct")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.at = 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise ValueError("Thrift data ends early")
        value = self.data[self.at]
        self.at += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ValueError("Thrift varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise ValueError("Thrift data ends early")
        out = bytes(self.data[self.at : self.at + n])
        self.at += n
        return out

    def value(self, kind: int) -> Any:
        if kind in (TRUE, FALSE):  # only inside lists, sets and maps: one byte
            return self.byte() == TRUE
        if kind == BYTE:
            b = self.byte()
            return b - 256 if b > 127 else b
        if kind in (I16, I32, I64):
            return self.zigzag()
        if kind == DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if kind == BINARY:
            return self.take(self.varint())
        if kind in (LIST, SET):
            header = self.byte()
            size, element_type = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            return ThriftList(kind, element_type, [self.value(element_type) for _ in range(size)])
        if kind == MAP:
            size = self.varint()
            if not size:
                return ThriftMap(0, 0, [])
            types = self.byte()
            key_type, value_type = types >> 4, types & 0x0F
            return ThriftMap(
                key_type, value_type, [(self.value(key_type), self.value(value_type)) for _ in range(size)]
            )
        if kind == STRUCT:
            return self.struct()
        raise ValueError(f"unknown Thrift wire type {kind}")

    def struct(self) -> list[Field]:
        fields: list[Field] = []
        last = 0
        while True:
            header = self.byte()
            if header == STOP:
                return fields
            delta, kind = header >> 4, header & 0x0F
            field_id = last + delta if delta else self.zigzag()
            value = (kind == TRUE) if kind in (TRUE, FALSE) else self.value(kind)
            fields.append(Field(field_id, kind, value))
            last = field_id


def decode_struct(data: bytes) -> tuple[list[Field], int]:
    """The struct at the start of ``data`` and how many bytes it took."""
    reader = _Reader(data)
    return reader.struct(), reader.at


def _varint(n: int, out: bytearray) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zigzag(n: int, out: bytearray) -> None:
    _varint((n << 1) ^ (n >> 63), out)


def _value(kind: int, value: Any, out: bytearray) -> None:
    if kind in (TRUE, FALSE):
        out.append(TRUE if value else FALSE)
    elif kind == BYTE:
        out.append(value & 0xFF)
    elif kind in (I16, I32, I64):
        _zigzag(value, out)
    elif kind == DOUBLE:
        out += struct.pack("<d", value)
    elif kind == BINARY:
        _varint(len(value), out)
        out += value
    elif kind in (LIST, SET):
        size = len(value.items)
        if size < 15:
            out.append((size << 4) | value.element_type)
        else:
            out.append(0xF0 | value.element_type)
            _varint(size, out)
        for item in value.items:
            _value(value.element_type, item, out)
    elif kind == MAP:
        _varint(len(value.items), out)
        if value.items:
            out.append((value.key_type << 4) | value.value_type)
            for k, v in value.items:
                _value(value.key_type, k, out)
                _value(value.value_type, v, out)
    elif kind == STRUCT:
        _struct(value, out)
    else:
        raise ValueError(f"unknown Thrift wire type {kind}")


def _struct(fields: list[Field], out: bytearray) -> None:
    last = 0
    for f in fields:
        kind = (TRUE if f.value else FALSE) if f.type in (TRUE, FALSE) else f.type
        delta = f.id - last
        if 0 < delta <= 15:
            out.append((delta << 4) | kind)
        else:
            out.append(kind)
            _zigzag(f.id, out)
        if kind not in (TRUE, FALSE):
            _value(kind, f.value, out)
        last = f.id
    out.append(STOP)


def encode_struct(fields: list[Field]) -> bytes:
    out = bytearray()
    _struct(fields, out)
    return bytes(out)
