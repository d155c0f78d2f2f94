from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herdless.marshal.messages import DecodeError, Kind, Message, decode, encode
from herdless.marshal.placement import coordinating_partition, member_partition

names = st.text(max_size=40)
messages = st.builds(
    Message,
    st.sampled_from(Kind),
    names,
    names,
    names,
    st.integers(-1, 2**31 - 1),
    st.integers(-1, 2**63 - 1),
    st.integers(0, 2**32 - 1),
)


@given(messages)
def test_round_trip(message: Message) -> None:
    assert decode(encode(message)) == message


def test_compact() -> None:
    raw = encode(Message(Kind.HEARTBEAT, "c1", "g", "clicks", 3, 1234, 1000))
    assert len(raw) == 18 + (2 + 2) + (2 + 1) + (2 + 6)
    assert raw[0] == 1  # the version leads


@pytest.mark.parametrize(
    "raw",
    [None, b"", b"\x01", b"\x02" + bytes(40), b"\x01\x09" + bytes(22), b"\x01\x01" + bytes(16)],
)
def test_rejects_what_it_does_not_understand(raw: bytes | None) -> None:
    with pytest.raises(DecodeError):
        decode(raw)


@given(st.binary(max_size=64))
def test_garbage_never_crashes(raw: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode(raw)


def test_placement_is_stable_and_spread() -> None:
    # Fixed values: a change would move every claim of every running group.
    assert [coordinating_partition("t", p, 8) for p in range(6)] == [4, 3, 2, 7, 2, 5]
    assert member_partition("g", 8) == 0
    spread = {coordinating_partition("clicks", p, 8) for p in range(64)}
    assert len(spread) == 8
