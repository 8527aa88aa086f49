from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtasks.errors import SerdeError, StateError
from streamtasks.state import BYTES, INT64, JSON, STRING, Serde

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(st.binary())
def test_bytes_round_trip(value: bytes) -> None:
    assert BYTES.deserialize(BYTES.serialize(value)) == value


@given(st.text())
def test_string_round_trip(value: str) -> None:
    assert STRING.deserialize(STRING.serialize(value)) == value


@given(st.integers(-(2**63), 2**63 - 1))
def test_int64_round_trip(value: int) -> None:
    assert INT64.deserialize(INT64.serialize(value)) == value


@given(json_values)
def test_json_round_trip(value: Any) -> None:
    assert JSON.deserialize(JSON.serialize(value)) == value


def test_int64_is_kafkas_big_endian_long() -> None:
    assert INT64.serialize(1) == b"\x00\x00\x00\x00\x00\x00\x00\x01"
    assert INT64.serialize(-1) == b"\xff" * 8
    assert INT64.serialize(-(2**63)) == b"\x80" + b"\x00" * 7
    assert INT64.deserialize(b"\x00\x00\x00\x00\x00\x00\x01\x00") == 256


def test_string_is_utf8_and_json_is_compact_with_sorted_keys() -> None:
    assert STRING.serialize("é") == b"\xc3\xa9"
    assert JSON.serialize({"b": [1, 2], "a": "é"}) == '{"a":"é","b":[1,2]}'.encode()


@pytest.mark.parametrize(
    ("serde", "data", "match"),
    [
        (STRING, b"\xff", "serde STRING: not UTF-8"),
        (INT64, b"\x00" * 7, "serde INT64: expected 8 bytes, got 7"),
        (INT64, b"\x00" * 9, "serde INT64: expected 8 bytes, got 9"),
        (JSON, b"{", "serde JSON: not JSON"),
        (JSON, b"\xff", "serde JSON: not UTF-8"),
        (JSON, b"NaN", "serde JSON: not JSON: NaN is not JSON"),
    ],
)
def test_malformed_bytes_raise_serde_error_naming_the_serde(
    serde: Serde[Any], data: bytes, match: str
) -> None:
    with pytest.raises(SerdeError, match=match) as caught:
        serde.deserialize(data)
    assert isinstance(caught.value, StateError)


@pytest.mark.parametrize(
    ("serde", "value", "match"),
    [
        (INT64, 2**63, "serde INT64: 9223372036854775808 does not fit"),
        (STRING, "\ud800", "serde STRING: cannot encode"),
        (JSON, float("nan"), "serde JSON: cannot serialize"),
    ],
)
def test_unserializable_values_raise_serde_error(serde: Serde[Any], value: object, match: str) -> None:
    with pytest.raises(SerdeError, match=match):
        serde.serialize(value)


@pytest.mark.parametrize(
    ("serde", "value"),
    [
        (BYTES, "text"),
        (BYTES, bytearray(b"x")),
        (STRING, b"bytes"),
        (INT64, "1"),
        (INT64, True),
        (JSON, object()),
    ],
)
def test_values_of_the_wrong_type_raise_type_error(serde: Serde[Any], value: object) -> None:
    with pytest.raises(TypeError, match=f"serde {serde!r}"):
        serde.serialize(value)
