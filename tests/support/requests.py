"""Requests naming one partition, a DescribeTopicPartitions page, and v2 batches, built
with kafka-python's classes: for tests that speak the protocol directly
(tests/support/wire.py, raw frames)."""

from __future__ import annotations

from collections.abc import Sequence

from kafka.protocol.admin import DescribeTopicPartitionsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder


def v2_batch(
    rows: Sequence[tuple[bytes | None, bytes | None, int]], *, base_sequence: int = -1
) -> bytes:
    """An uncompressed v2 batch of (key, value, timestamp) records."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for i, (key, value, timestamp) in enumerate(rows):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=[])
    return bytes(builder.build())


def produce_request(
    version: int, topic: str, records: bytes, *, partition: int = 0, acks: int = -1
) -> object:
    Topic = ProduceRequest.TopicProduceData
    return ProduceRequest[version](
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            Topic(
                name=topic,
                partition_data=[Topic.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )


def fetch_request(version: int, topic: str, offset: int, max_bytes: int) -> object:
    Topic = FetchRequest.FetchTopic
    return FetchRequest[version](
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        topics=[
            Topic(
                topic=topic,
                partitions=[
                    Topic.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=max_bytes
                    )
                ],
            )
        ],
    )


def list_offsets_v0_request(topic: str, timestamp: int, max_num_offsets: int) -> object:
    Topic = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest[0](
        replica_id=-1,
        topics=[
            Topic(
                name=topic,
                partitions=[
                    Topic.ListOffsetsPartition(
                        partition_index=0, timestamp=timestamp, max_num_offsets=max_num_offsets
                    )
                ],
            )
        ],
    )


def describe_topic_partitions_request(
    topics: Sequence[str], limit: int = 2000, cursor: tuple[str, int] | None = None
) -> object:
    """DescribeTopicPartitions v0: `topics` (none for all), at most `limit` partitions,
    from the cursor (topic, partition) when given."""
    request = DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name=t) for t in topics],
        response_partition_limit=limit,
        cursor=(
            None
            if cursor is None
            else DescribeTopicPartitionsRequest.Cursor(
                topic_name=cursor[0], partition_index=cursor[1]
            )
        ),
    )
    request.API_VERSION = 0
    return request
