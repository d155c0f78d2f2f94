"""Fetch with long polling: a fetch short of min_bytes parks until an append wakes it.

Fetch sessions (KIP-227) are declined by answering session id 0, which every
client accepts by sending full fetch requests.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from herdless.broker.replicas import PartitionError
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.storage import StorageError

if TYPE_CHECKING:
    from herdless.broker.context import BrokerContext

FETCH = 1


async def handle_fetch(context: BrokerContext, request: Request) -> Any:
    body = request.body
    deadline = time.monotonic() + max(body.max_wait_ms, 0) / 1000
    wanted = [(topic.topic, p.partition) for topic in body.topics for p in topic.partitions]
    while True:
        responses, size = _read(context, body)
        remaining = deadline - time.monotonic()
        if size >= body.min_bytes or remaining <= 0 or context.stopping:
            break
        await context.replicas.wait_for_appends(wanted, remaining)
    return response_class(FETCH)(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        session_id=0,
        responses=responses,
    )


def _read(context: BrokerContext, body: Any) -> tuple[list[Any], int]:
    TopicResponse = response_class(FETCH).FetchableTopicResponse
    PartitionData = TopicResponse.PartitionData
    budget = body.max_bytes if body.max_bytes is not None else 0x7FFFFFFF
    replica_id = body.replica_id if body.replica_id is not None else -1
    replicas = context.replicas
    total = 0
    topics = []
    for topic in body.topics:
        partitions = []
        for wanted in topic.partitions:
            data = PartitionData(
                partition_index=wanted.partition,
                error_code=ErrorCode.NONE,
                high_watermark=-1,
                last_stable_offset=-1,
                log_start_offset=-1,
                aborted_transactions=None,
                preferred_read_replica=-1,
                records=b"",
            )
            partitions.append(data)
            epoch = wanted.current_leader_epoch
            try:
                if replica_id >= 0:
                    # A follower: it reads past the high watermark, and where it fetches
                    # tells the leader how far it has got.
                    partition_log = replicas.follower_log(
                        topic.topic, wanted.partition, replica_id, epoch
                    )
                    replicas.record_follower_fetch(
                        topic.topic, wanted.partition, replica_id, wanted.fetch_offset
                    )
                    max_offset = None
                else:
                    partition_log = replicas.leader_log(topic.topic, wanted.partition, epoch)
                    max_offset = partition_log.high_watermark
            except PartitionError as exc:
                data.error_code = exc.error_code
                continue
            data.high_watermark = data.last_stable_offset = partition_log.high_watermark
            data.log_start_offset = partition_log.log_start_offset
            # Past the response budget a partition still reports its offsets, without records;
            # the first one always gets a whole batch so a large batch cannot stall a consumer.
            limit = min(wanted.partition_max_bytes, budget - total)
            if limit <= 0 and total > 0:
                continue
            try:
                records = partition_log.read(
                    wanted.fetch_offset, max(limit, 1), max_offset=max_offset
                )
            except StorageError as exc:
                # Out of range, or the log closed under us (topic deleted, shutdown).
                data.error_code = exc.error_code
                continue
            data.records = records
            total += len(records)
        topics.append(TopicResponse(topic=topic.topic, partitions=partitions))
    return topics, total
