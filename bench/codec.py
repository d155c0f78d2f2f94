"""Microseconds per request decoded and per response encoded: the code written per version
from the schemas (protocol/schema_codec.py) beside kafka-python's own codec, in process.

Each API gets a message shaped as clients send it or as the broker answers it: one topic,
four partitions, short strings, 1 MiB of records in a Produce request and in each of four
partitions of a Fetch response. kafka-python's path is the one the broker took before:
decode with the header, then validate.null_violation; encode with a header, framed.

    python bench/codec.py
    python bench/codec.py --repeat 9
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable
from typing import Any

from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import REQUESTS, RESPONSES
from herdless.protocol.schema_codec import request_decoder, response_encoder
from herdless.protocol.validate import null_violation

PARTITIONS = range(4)
RECORDS = bytes(1 << 20)


def _requests() -> dict[str, tuple[Any, int]]:
    produce, fetch, metadata = (
        REQUESTS[k] for k in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA)
    )
    commit, offsets, join, heartbeat, sync = (
        REQUESTS[k]
        for k in (
            ApiKey.OFFSET_COMMIT,
            ApiKey.OFFSET_FETCH,
            ApiKey.JOIN_GROUP,
            ApiKey.HEARTBEAT,
            ApiKey.SYNC_GROUP,
        )
    )
    ProduceTopic, FetchTopic = produce.TopicProduceData, fetch.FetchTopic
    CommitTopic, OffsetsGroup = commit.OffsetCommitRequestTopic, offsets.OffsetFetchRequestGroup
    return {
        "Produce v9, 1 MiB": (
            produce(
                transactional_id=None,
                acks=-1,
                timeout_ms=30_000,
                topic_data=[
                    ProduceTopic(
                        name="bench",
                        partition_data=[
                            ProduceTopic.PartitionProduceData(index=0, records=RECORDS)
                        ],
                    )
                ],
            ),
            9,
        ),
        "Fetch v12, 4 partitions": (
            fetch(
                replica_id=-1,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=52_428_800,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[
                    FetchTopic(
                        topic="bench",
                        partitions=[
                            FetchTopic.FetchPartition(
                                partition=p,
                                current_leader_epoch=0,
                                fetch_offset=1000,
                                last_fetched_epoch=-1,
                                log_start_offset=-1,
                                partition_max_bytes=1 << 20,
                            )
                            for p in PARTITIONS
                        ],
                    )
                ],
                forgotten_topics_data=[],
                rack_id="",
            ),
            12,
        ),
        "Metadata v12, 1 topic": (
            metadata(
                topics=[metadata.MetadataRequestTopic(topic_id=None, name="bench")],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            12,
        ),
        "OffsetCommit v8, 4 partitions": (
            commit(
                group_id="group-1",
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=[
                    CommitTopic(
                        name="bench",
                        partitions=[
                            CommitTopic.OffsetCommitRequestPartition(
                                partition_index=p,
                                committed_offset=1000 + p,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            )
                            for p in PARTITIONS
                        ],
                    )
                ],
            ),
            8,
        ),
        "OffsetFetch v8, 4 partitions": (
            offsets(
                groups=[
                    OffsetsGroup(
                        group_id="group-1",
                        topics=[
                            OffsetsGroup.OffsetFetchRequestTopics(
                                name="bench", partition_indexes=list(PARTITIONS)
                            )
                        ],
                    )
                ],
                require_stable=False,
            ),
            8,
        ),
        "JoinGroup v9": (
            join(
                group_id="group-1",
                session_timeout_ms=10_000,
                rebalance_timeout_ms=60_000,
                member_id="member-1",
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[
                    join.JoinGroupRequestProtocol(name="range", metadata=bytes(40)),
                    join.JoinGroupRequestProtocol(name="roundrobin", metadata=bytes(40)),
                ],
                reason=None,
            ),
            9,
        ),
        "Heartbeat v4": (
            heartbeat(
                group_id="group-1", generation_id=7, member_id="member-1", group_instance_id=None
            ),
            4,
        ),
        "SyncGroup v5": (
            sync(
                group_id="group-1",
                generation_id=7,
                member_id="member-1",
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=[],
            ),
            5,
        ),
    }


def _responses() -> dict[str, tuple[Any, int]]:
    fetch, commit, heartbeat = (
        RESPONSES[k] for k in (ApiKey.FETCH, ApiKey.OFFSET_COMMIT, ApiKey.HEARTBEAT)
    )
    Topic, CommitTopic = fetch.FetchableTopicResponse, commit.OffsetCommitResponseTopic
    return {
        "Fetch v12, 4 x 1 MiB": (
            fetch(
                throttle_time_ms=0,
                error_code=0,
                session_id=0,
                responses=[
                    Topic(
                        topic="bench",
                        partitions=[
                            Topic.PartitionData(
                                partition_index=p,
                                error_code=0,
                                high_watermark=10_000,
                                last_stable_offset=10_000,
                                log_start_offset=0,
                                aborted_transactions=None,
                                preferred_read_replica=-1,
                                records=RECORDS,
                            )
                            for p in PARTITIONS
                        ],
                    )
                ],
            ),
            12,
        ),
        "OffsetCommit v8, 4 partitions": (
            commit(
                throttle_time_ms=0,
                topics=[
                    CommitTopic(
                        name="bench",
                        partitions=[
                            CommitTopic.OffsetCommitResponsePartition(
                                partition_index=p, error_code=0
                            )
                            for p in PARTITIONS
                        ],
                    )
                ],
            ),
            8,
        ),
        "Heartbeat v4": (heartbeat(throttle_time_ms=0, error_code=0), 4),
    }


def _frame(request: Any, version: int) -> bytes:
    request.API_VERSION = version
    request.with_header(correlation_id=7, client_id="rdkafka")
    return bytes(request.encode(header=True))


def _best_us(function: Callable[[], Any], repeat: int) -> float:
    number = 200
    return min(timeit.repeat(function, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="timing runs; the best is kept")
    args = parser.parse_args()
    print(f"{'request decoded':34} {'kafka-python':>13} {'compiled':>9} {'ratio':>6}")
    for name, (request, version) in _requests().items():
        cls = type(request)
        frame = _frame(request, version)
        decode = request_decoder(cls, version)[0]

        def by_kafka_python(cls: Any = cls, frame: bytes = frame, version: int = version) -> Any:
            body = cls.decode(frame, version=version, header=True)
            return null_violation(body, version)

        before = _best_us(by_kafka_python, args.repeat)
        after = _best_us(lambda decode=decode, frame=frame: decode(frame), args.repeat)
        print(f"{name:34} {before:10.1f} us {after:6.1f} us {before / after:6.1f}")
    print(f"\n{'response encoded':34} {'kafka-python':>13} {'compiled':>9} {'ratio':>6}")
    for name, (response, version) in _responses().items():
        encode = response_encoder(type(response), version)[0]

        def by_kafka_python(response: Any = response, version: int = version) -> bytes:
            response._header = None  # kafka-python cannot set the version of a framed one
            response.API_VERSION = version
            response.with_header(correlation_id=7)
            return bytes(response.encode(header=True, framed=True))

        before = _best_us(by_kafka_python, args.repeat)
        after = _best_us(lambda encode=encode, response=response: encode(response, 7), args.repeat)
        print(f"{name:34} {before:10.1f} us {after:6.1f} us {before / after:6.1f}")


if __name__ == "__main__":
    main()
