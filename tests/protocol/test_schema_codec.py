"""The compiled codecs against kafka-python's, for every version of every compiled API:
requests decode to the same objects, responses encode to the same bytes."""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from herdless.broker.handlers.apis import APIS
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import (
    COMPILED_APIS,
    REQUESTS,
    RESPONSES,
    decode_request,
    encode_response,
    read_prefix,
)
from herdless.protocol.offset_commit import (
    CommitPartition,
    CommitResponse,
    CommitTopic,
    PartitionError,
    TopicErrors,
)
from herdless.protocol.regions import FileRegion
from herdless.protocol.schema_codec import request_decoder, response_encoder
from herdless.protocol.validate import null_violation
from tests.protocol.messages import UNKNOWN_TAGS, flexible_request_frame, messages, tree

# Every version herdless serves of the compiled APIs (docs/compatibility.md).
SERVED = [
    (key, version)
    for key in sorted(COMPILED_APIS)
    for version in range(APIS[key].min_version, APIS[key].max_version + 1)
]
EXAMPLES = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _kafka_python_frame(request: Any, version: int, correlation_id: int, client_id: str) -> bytes:
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True))


@pytest.mark.parametrize(("api_key", "version"), SERVED)
@EXAMPLES
@given(data=st.data())
def test_requests_decode_as_kafka_python_decodes_them(
    api_key: int, version: int, data: st.DataObject
) -> None:
    cls = REQUESTS[api_key]
    request = data.draw(messages(cls, version))
    correlation_id = data.draw(st.integers(-(2**31), 2**31 - 1))
    client_id = data.draw(st.none() | st.text(max_size=10))
    frame = _kafka_python_frame(request, version, correlation_id, client_id)
    if cls.flexible_version_q(version):
        # kafka-python writes no unknown tagged fields: the reference writer does.
        written = flexible_request_frame(
            request, version, correlation_id, client_id, {}, unknown=False
        )
        assert written == frame
        header_tags = data.draw(UNKNOWN_TAGS)
        frame = flexible_request_frame(request, version, correlation_id, client_id, header_tags)
    decode, _ = request_decoder(cls, version)
    ours, null_field = decode(frame)
    theirs = cls.decode(frame, version=version, header=True)
    assert null_field is None
    assert tree(ours) == tree(theirs)


@pytest.fixture(scope="module")
def segment_file() -> Iterator[int]:
    """A file to take FileRegions of; position p holds byte p % 251."""
    with tempfile.TemporaryFile() as file:
        file.write(bytes(i % 251 for i in range(4096)))
        file.flush()
        yield file.fileno()


def _regions(response: Any, fd: int, draw: Any) -> Iterator[tuple[Any, bytes]]:
    """Turn some of a Fetch response's records into regions of `fd`; yield each partition
    whose records changed with the bytes kafka-python should see."""
    for topic in response.responses or ():
        for partition in topic.partitions or ():
            if partition.records is None or not draw(st.booleans()):
                continue
            length = len(partition.records)
            position = draw(st.integers(0, 4096 - length))
            region = FileRegion(os.dup(fd), position, length)
            yield partition, os.pread(fd, length, position)
            partition.records = region


def _joined(chunks: list[Any]) -> bytes:
    return b"".join(c.read() if isinstance(c, FileRegion) else bytes(c) for c in chunks)


@pytest.mark.parametrize(("api_key", "version"), SERVED)
@EXAMPLES
@given(data=st.data())
def test_responses_encode_as_kafka_python_encodes_them(
    api_key: int, version: int, data: st.DataObject, segment_file: int
) -> None:
    cls = RESPONSES[api_key]
    response = data.draw(messages(cls, version))
    correlation_id = data.draw(st.integers(-(2**31), 2**31 - 1))
    encode, _ = response_encoder(cls, version)
    regions = list(_regions(response, segment_file, data.draw)) if api_key == ApiKey.FETCH else []
    chunks = encode(response, correlation_id)
    for partition, records in regions:
        partition.records = records
    response.API_VERSION = version
    response.with_header(correlation_id=correlation_id)
    expected = bytes(response.encode(header=True, framed=True))
    assert _joined(chunks) == expected
    assert len(chunks) == 2 * len(regions) + 1
    assert struct.unpack(">i", expected[:4])[0] == sum(map(len, chunks)) - 4


def _nullable_places(item: Any, version: int) -> Iterator[tuple[Any, str]]:
    """(object, field name) of every string, bytes or array field a message holds, tagged
    ones aside, in the order they are encoded."""
    for f in item._struct.untagged_fields(version):
        value = getattr(item, f.name)
        if f.is_array() or f.type_str in ("string", "bytes", "records"):
            yield item, f.name
        if f.is_struct_array():
            for element in value or ():
                yield from _nullable_places(element, version)
        elif f.is_struct() and value is not None:
            yield from _nullable_places(value, version)


@pytest.mark.parametrize(("api_key", "version"), SERVED)
@EXAMPLES
@given(data=st.data())
def test_a_forbidden_null_is_found_where_validate_finds_it(
    api_key: int, version: int, data: st.DataObject
) -> None:
    cls = REQUESTS[api_key]
    request = data.draw(messages(cls, version))
    places = list(_nullable_places(request, version))
    for item, name in data.draw(st.lists(st.sampled_from(places), max_size=2)) if places else ():
        setattr(item, name, None)
    frame = _kafka_python_frame(request, version, 1, "c")
    _, null_field = request_decoder(cls, version)[0](frame)
    assert null_field == null_violation(cls.decode(frame, version=version, header=True), version)


_COMMIT = APIS[ApiKey.OFFSET_COMMIT]
_COMMIT_VERSIONS = range(_COMMIT.min_version, _COMMIT.max_version + 1)


@settings(max_examples=200, deadline=None)
@given(
    version=st.sampled_from(_COMMIT_VERSIONS),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    topics=st.lists(
        st.tuples(
            st.text(max_size=20),
            st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(-1, 200)), max_size=5),
        ),
        max_size=4,
    ),
)
def test_an_offset_commit_answer_of_tuples_encodes_as_kafka_pythons(
    version: int, correlation_id: int, topics: list[tuple[str, list[tuple[int, int]]]]
) -> None:
    """The OffsetCommit handler answers with plain tuples (protocol/offset_commit.py):
    the bytes must be those of kafka-python's message, at every version served."""
    Response = RESPONSES[ApiKey.OFFSET_COMMIT]
    Topic = Response.OffsetCommitResponseTopic
    Partition = Topic.OffsetCommitResponsePartition
    message = Response(
        throttle_time_ms=0,
        topics=[
            Topic(
                name=name, partitions=[Partition(partition_index=p, error_code=e) for p, e in parts]
            )
            for name, parts in topics
        ],
    )
    answer = CommitResponse(
        0,
        tuple(
            TopicErrors(name, tuple(PartitionError(p, e) for p, e in parts))
            for name, parts in topics
        ),
    )

    def joined(chunks: list[Any]) -> bytes:
        return b"".join(bytes(c) for c in chunks)

    assert joined(encode_response(answer, version, correlation_id)) == joined(
        encode_response(message, version, correlation_id)
    )


@pytest.mark.parametrize("version", _COMMIT_VERSIONS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_an_offset_commit_decodes_into_plain_tuples(version: int, data: st.DataObject) -> None:
    """The OffsetCommit handler has its topics and partitions decoded as the coordinator's
    CommitTopic and CommitPartition tuples: the values must be those kafka-python
    reads, a field the version lacks at the tuple's default, unknown tags skipped."""
    cls = REQUESTS[ApiKey.OFFSET_COMMIT]
    request = data.draw(messages(cls, version))
    frame = _kafka_python_frame(request, version, 7, "c")
    if cls.flexible_version_q(version):
        frame = flexible_request_frame(request, version, 7, "c", data.draw(UNKNOWN_TAGS))
    ours = decode_request(frame, read_prefix(frame)).body
    theirs = cls.decode(frame, version=version, header=True)
    assert ours.group_id == theirs.group_id
    assert ours.generation_id_or_member_epoch == theirs.generation_id_or_member_epoch
    assert ours.topics == [
        CommitTopic(
            t.name,
            tuple(
                CommitPartition(
                    p.partition_index,
                    p.committed_offset,
                    p.committed_metadata,
                    p.committed_leader_epoch if version >= 6 else -1,
                    p.commit_timestamp if version == 1 else -1,
                )
                for p in t.partitions
            ),
        )
        for t in theirs.topics
    ]
