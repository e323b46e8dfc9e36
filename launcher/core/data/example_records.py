"""`tf.train.Example` records of text features, encoded here: what MaxText's Grain pipeline
parses from each ArrayRecord entry (maxtext/input_pipeline/protos/example.proto, TensorFlow's
own), written without TensorFlow, protobuf or MaxText installed, so `data prepare` runs on any
workstation. tests/unit/test_data_prepare.py holds the bytes to MaxText's generated classes.

    Example  { Features features = 1; }
    Features { map<string, Feature> feature = 1; }   (a map entry: key = 1, value = 2)
    Feature  { oneof kind { BytesList bytes_list = 1; ... } }
    BytesList { repeated bytes value = 1; }
"""

from __future__ import annotations

from collections.abc import Sequence

_LENGTH_DELIMITED = 2  # protobuf's wire type of strings, bytes and embedded messages


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(payload)) + payload


def example_bytes(doc: Sequence[str], features: Sequence[str]) -> bytes:
    """One Example whose features each hold one UTF-8 text, its map entries in key order, as
    protobuf's deterministic serialization writes them (its default order is a hash table's)."""
    entries = b""
    for name, text in sorted(zip(features, doc, strict=True)):
        value = _field(1, _field(1, text.encode()))  # Feature.bytes_list.value
        entries += _field(1, _field(1, name.encode()) + _field(2, value))  # a map entry
    return _field(1, entries)  # Example.features
