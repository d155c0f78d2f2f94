"""An idempotent producer's batch pipelined behind one the leader refused unwritten.

librdkafka answers OUT_OF_ORDER_SEQUENCE_NUMBER on a batch other than the first in
flight by bumping its epoch and renumbering everything unacknowledged, which writes
again batches that were written but not yet acknowledged (librdkafka issue #4953).
So the batch behind a refused one gets the refusal again, and both go in order on
their retry; a gap that no refusal explains is still out of order.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from herdless.broker.peers.connection import PeerConnection
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import encode_batch
from tests.support.broker import BrokerProcess

TIMEOUT_S = 30


@pytest.fixture
def wire(broker: BrokerProcess) -> Iterator[Callable[..., Any]]:
    """Raw requests on one connection, as a producer pipelines them."""
    with asyncio.Runner() as runner:
        connection = PeerConnection("127.0.0.1", broker.port, "refusal-tests", TIMEOUT_S)

        def call(api_key: int, version: int, **fields: Any) -> Any:
            return runner.run(connection.request(api_key, version, **fields))

        yield call
        connection.close()


def set_min_insync_replicas(admin: AdminClient, topic: str, value: int) -> None:
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(
                "min.insync.replicas", str(value), incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


def test_the_batch_behind_a_refused_one_is_refused_alike(
    broker: BrokerProcess, wire: Callable[..., Any]
) -> None:
    topic = f"refusals-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
    init = wire(
        ApiKey.INIT_PRODUCER_ID,
        4,
        transactional_id=None,
        transaction_timeout_ms=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    assert init.error_code == ErrorCode.NONE

    def produce(sequence: int) -> Any:
        records = encode_batch(
            [(int(time.time() * 1000), None, f"v-{sequence}".encode())],
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            base_sequence=sequence,
        )
        answer = wire(
            ApiKey.PRODUCE,
            9,
            transactional_id=None,
            acks=-1,
            timeout_ms=5000,
            topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        )
        return answer.responses[0].partition_responses[0]

    assert produce(0).error_code == ErrorCode.NONE
    # One replica against min.insync.replicas 2: acks=all is refused, nothing written.
    set_min_insync_replicas(admin, topic, 2)
    assert produce(1).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    # The cause passes before the batch sent behind the refused one is read.
    set_min_insync_replicas(admin, topic, 1)
    behind = produce(2)
    assert behind.error_code == ErrorCode.NOT_ENOUGH_REPLICAS, behind
    assert "refused" in behind.error_message
    # Retried in order, both are written once.
    first, second = produce(1), produce(2)
    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 1)
    assert (second.error_code, second.base_offset) == (ErrorCode.NONE, 2)
    again = produce(2)
    assert (again.error_code, again.base_offset) == (ErrorCode.NONE, 2)
    # A gap no refusal explains is out of order, as in Kafka.
    assert produce(5).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
