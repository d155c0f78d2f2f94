"""Transactions on one broker, with confluent-kafka's transactional producer.

What a producer relies on: init_transactions, commit and abort work (confluent-kafka's,
kafka-python's and aiokafka's); each ended
transaction leaves one marker in each of its partitions (the high watermark counts
them); DescribeTransactions and ListTransactions show the transactional id; a second
producer with the same transactional id fences the first; a transaction left open
past its timeout is aborted by the coordinator; and bad input gets Kafka's codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka.record.default_records import DefaultRecordBatchBuilder

from herdless.broker.peers.connection import PeerConnection
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess, module_broker
from tests.support.waiting import wait_for

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("transactions") / "data"
    with module_broker(data_dir, "--set", "group.initial.rebalance.delay.ms=0") as process:
        yield process


@pytest.fixture(scope="module")
def wire(broker: BrokerProcess) -> Iterator[Callable[..., Any]]:
    """Raw requests to the broker: (api key, version, **fields) -> response."""
    with asyncio.Runner() as runner:
        connection = PeerConnection("127.0.0.1", broker.port, "txn-tests", TIMEOUT_S)

        def call(api_key: int, version: int, **fields: Any) -> Any:
            return runner.run(connection.request(api_key, version, **fields))

        yield call
        connection.close()


def new_topic(broker: BrokerProcess, partitions: int = 2) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT_S)
    return name


def producer(broker: BrokerProcess, transactional_id: str, **settings: Any) -> Producer:
    return Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id, **settings}
    )


def high_watermarks(broker: BrokerProcess, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "txn-watermarks"})
    try:
        return [
            consumer.get_watermark_offsets(KafkaPartition(topic, p), TIMEOUT_S)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


def described(wire: Callable[..., Any], transactional_id: str) -> Any:
    answer = wire(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[transactional_id])
    (state,) = answer.transaction_states
    return state


def watermarks_reach(broker: BrokerProcess, topic: str, expected: list[int]) -> None:
    """The markers are written once EndTxn is answered: wait for them to be counted."""
    wait_for(
        lambda: high_watermarks(broker, topic, len(expected)) == expected,
        f"high watermarks of {topic} at {expected}",
    )


def one_line(broker: BrokerProcess, *words: str) -> str:
    """The one line of the broker's log holding all of `words`: bad input is said once."""
    lines = [line for line in broker.log().splitlines() if all(w in line for w in words)]
    assert len(lines) == 1, f"{len(lines)} lines with {words}: {lines}"
    return lines[0]


def transactional_batch(init: Any, timestamp_ms: int | None = None) -> bytes:
    """One record in a transactional batch of the producer InitProducerId answered."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=init.producer_id,
        producer_epoch=init.producer_epoch,
        base_sequence=0,
        batch_size=1 << 20,
    )
    stamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    builder.append(0, timestamp=stamp, key=None, value=b"x", headers=[])
    return bytes(builder.build())


def test_commit_and_abort_leave_one_marker_per_partition(
    broker: BrokerProcess, wire: Callable[..., Any]
) -> None:
    topic = new_topic(broker)
    txn_id = f"commit-{topic}"
    p = producer(broker, txn_id)
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"%d" % i, partition=i % 2)
    p.commit_transaction(TIMEOUT_S)
    # Five records and a COMMIT marker in each partition.
    watermarks_reach(broker, topic, [6, 6])
    state = described(wire, txn_id)
    assert (state.error_code, state.transaction_state) == (ErrorCode.NONE, "CompleteCommit")

    p.begin_transaction()
    p.produce(topic, value=b"dropped", partition=0)
    p.flush(TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)
    watermarks_reach(broker, topic, [8, 6])
    assert described(wire, txn_id).transaction_state == "CompleteAbort"
    listed = wire(ApiKey.LIST_TRANSACTIONS, 1, state_filters=[], producer_id_filters=[])
    assert listed.error_code == ErrorCode.NONE
    assert txn_id in {s.transactional_id for s in listed.transaction_states}
    log = broker.log()
    assert f"transaction {txn_id} committed" in log
    assert f"transaction {txn_id} aborted" in log


def test_transactions_are_listed_by_a_pattern_of_their_ids(
    broker: BrokerProcess, wire: Callable[..., Any]
) -> None:
    """ListTransactions v2 (KIP-1152): ids the pattern matches whole; a pattern that is
    no regular expression gets INVALID_REGULAR_EXPRESSION."""
    run = uuid.uuid4().hex[:8]
    for name in ("orders-1", "orders-2", "invoices-1"):
        producer(broker, f"{run}-{name}").init_transactions(TIMEOUT_S)

    def listed(pattern: str | None, **filters: Any) -> set[str]:
        answer = wire(
            ApiKey.LIST_TRANSACTIONS,
            2,
            state_filters=[],
            producer_id_filters=[],
            transactional_id_pattern=pattern,
            **filters,
        )
        assert answer.error_code == ErrorCode.NONE
        return {s.transactional_id for s in answer.transaction_states if run in s.transactional_id}

    assert listed(f"{run}-orders-.*") == {f"{run}-orders-1", f"{run}-orders-2"}
    # Matched whole, as Java's Matcher.matches: a part of an id is not enough.
    assert listed("orders") == set()
    assert len(listed(None)) == len(listed("")) == 3
    # None of them has a transaction open: the duration filter (v1) leaves none.
    assert listed(f"{run}-.*", duration_filter=0) == set()
    bad = wire(
        ApiKey.LIST_TRANSACTIONS,
        2,
        state_filters=[],
        producer_id_filters=[],
        transactional_id_pattern="orders-(",
    )
    assert (bad.error_code, bad.transaction_states) == (ErrorCode.INVALID_REGULAR_EXPRESSION, [])
    one_line(broker, "ListTransactions refused", "orders-(")


def test_a_second_producer_fences_the_first(
    broker: BrokerProcess, wire: Callable[..., Any]
) -> None:
    topic = new_topic(broker, 1)
    txn_id = f"fence-{topic}"
    first = producer(broker, txn_id)
    first.init_transactions(TIMEOUT_S)
    first.begin_transaction()
    first.produce(topic, value=b"zombie")
    first.flush(TIMEOUT_S)
    second = producer(broker, txn_id)
    # Its open transaction is aborted before the second producer gets its epoch.
    second.init_transactions(TIMEOUT_S)
    with pytest.raises(KafkaException) as refused:
        first.commit_transaction(TIMEOUT_S)
    error: KafkaError = refused.value.args[0]
    assert error.fatal() or error.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ), error
    second.begin_transaction()
    second.produce(topic, value=b"kept")
    second.commit_transaction(TIMEOUT_S)
    # The zombie's record and its ABORT marker, then the record and its COMMIT marker.
    watermarks_reach(broker, topic, [4])
    one_line(broker, f"transactional id {txn_id}: a new producer fenced")


def test_a_transaction_open_past_its_timeout_is_aborted(
    broker: BrokerProcess, wire: Callable[..., Any]
) -> None:
    topic = new_topic(broker, 1)
    txn_id = f"timeout-{topic}"
    p = producer(broker, txn_id, **{"transaction.timeout.ms": 1500})
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    p.produce(topic, value=b"forgotten")
    p.flush(TIMEOUT_S)
    wait_for(
        lambda: described(wire, txn_id).transaction_state == "CompleteAbort",
        "the coordinator aborting the transaction",
    )
    watermarks_reach(broker, topic, [2])
    one_line(broker, f"transaction {txn_id} aborted", "past its transaction.timeout.ms of 1500")
    with pytest.raises(KafkaException):
        p.commit_transaction(TIMEOUT_S)


def test_end_txn_after_the_coordinator_aborted_on_timeout(
    broker: BrokerProcess, wire: Callable[..., Any]
) -> None:
    """The producer of a transaction its coordinator aborted (open past its timeout) is
    fenced: its EndTxn gets PRODUCER_FENCED, said once, and the abort is said once."""
    topic = new_topic(broker, 1)
    txn_id = f"late-{topic}"
    init = wire(
        ApiKey.INIT_PRODUCER_ID,
        4,
        transactional_id=txn_id,
        transaction_timeout_ms=1000,
        producer_id=-1,
        producer_epoch=-1,
    )
    added = wire(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=init.producer_id,
        v3_and_below_producer_epoch=init.producer_epoch,
        v3_and_below_topics=[{"name": topic, "partitions": [0]}],
    )
    (result,) = added.results_by_topic_v3_and_below[0].results_by_partition
    assert result.partition_error_code == ErrorCode.NONE
    wait_for(
        lambda: described(wire, txn_id).transaction_state == "CompleteAbort",
        "the coordinator aborting the transaction",
    )
    answer = wire(
        ApiKey.END_TXN,
        3,
        transactional_id=txn_id,
        producer_id=init.producer_id,
        producer_epoch=init.producer_epoch,
        committed=True,
    )
    assert answer.error_code == ErrorCode.PRODUCER_FENCED
    one_line(broker, f"transaction {txn_id} aborted", "past its transaction.timeout.ms of 1000")
    assert one_line(broker, f"EndTxn of transactional id {txn_id} ").endswith(
        "refused: PRODUCER_FENCED"
    )


def test_add_partitions_with_an_unknown_topic_adds_nothing(
    broker: BrokerProcess, wire: Callable[..., Any]
) -> None:
    topic = new_topic(broker, 1)
    txn_id = f"unknown-topic-{topic}"
    init = wire(
        ApiKey.INIT_PRODUCER_ID,
        4,
        transactional_id=txn_id,
        transaction_timeout_ms=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    added = wire(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=init.producer_id,
        v3_and_below_producer_epoch=init.producer_epoch,
        v3_and_below_topics=[
            {"name": topic, "partitions": [0]},
            {"name": "no-such-topic", "partitions": [0]},
        ],
    )
    codes = {
        (t.name, p.partition_index): p.partition_error_code
        for t in added.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }
    # As Kafka: the partition at fault is named, and the others are not added.
    assert codes == {
        (topic, 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert described(wire, txn_id).topics == []
    assert "Traceback" not in broker.log()


def test_end_txn_for_an_unknown_transactional_id(
    broker: BrokerProcess, wire: Callable[..., Any]
) -> None:
    # As a client does first (the first one also creates the transaction log).
    found = wire(ApiKey.FIND_COORDINATOR, 3, key="nobody-knows-me", key_type=1)
    assert found.error_code == ErrorCode.NONE
    wait_for(
        lambda: (
            wire(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=["nobody-knows-me"])
            .transaction_states[0]
            .error_code
            == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        ),
        "the transaction log loaded",
    )
    answer = wire(
        ApiKey.END_TXN,
        3,
        transactional_id="nobody-knows-me",
        producer_id=12345,
        producer_epoch=0,
        committed=True,
    )
    assert answer.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert one_line(broker, "EndTxn of transactional id nobody-knows-me").endswith(
        "refused: INVALID_PRODUCER_ID_MAPPING"
    )
    (state,) = wire(
        ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=["nobody-knows-me"]
    ).transaction_states
    assert state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_a_transactional_batch_outside_the_transaction_is_refused(
    broker: BrokerProcess, wire: Callable[..., Any]
) -> None:
    topic = new_topic(broker, 2)
    txn_id = f"unadded-{topic}"
    init = wire(
        ApiKey.INIT_PRODUCER_ID,
        4,
        transactional_id=txn_id,
        transaction_timeout_ms=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    assert init.error_code == ErrorCode.NONE
    for version, partition, expected in (
        # Produce from v11 on knows TRANSACTION_ABORTABLE; older ones get INVALID_TXN_STATE.
        (9, 0, ErrorCode.INVALID_TXN_STATE),
        (11, 1, ErrorCode.TRANSACTION_ABORTABLE),
    ):
        answer = wire(
            ApiKey.PRODUCE,
            version,
            transactional_id=txn_id,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                {
                    "name": topic,
                    "partition_data": [{"index": partition, "records": transactional_batch(init)}],
                }
            ],
        )
        # No AddPartitionsToTxn came first: nothing is written.
        assert answer.responses[0].partition_responses[0].error_code == expected
        line = one_line(
            broker, f"refused a batch of transactional id {txn_id} ", f"for {topic}-{partition} "
        )
        assert f"with {expected.name}" in line and "no AddPartitionsToTxn" in line, line
    watermarks_reach(broker, topic, [0, 0])


def test_a_transaction_version_2_producer_adds_partitions_by_writing(
    broker: BrokerProcess, wire: Callable[..., Any]
) -> None:
    """KIP-890 part 2: a producer of transaction version 2 sends no AddPartitionsToTxn
    or AddOffsetsToTxn. Produce v12 adds each partition it writes to the transaction,
    TxnOffsetCommit v5 the group's offsets partition; EndTxn then commits them all."""
    topic = new_topic(broker, 2)
    txn_id = f"tv2-{topic}"
    group = f"tv2-group-{topic}"
    init = wire(
        ApiKey.INIT_PRODUCER_ID,
        5,
        transactional_id=txn_id,
        transaction_timeout_ms=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    assert init.error_code == ErrorCode.NONE
    for partition in (0, 1):
        answer = wire(
            ApiKey.PRODUCE,
            12,
            transactional_id=txn_id,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                {
                    "name": topic,
                    "partition_data": [{"index": partition, "records": transactional_batch(init)}],
                }
            ],
        )
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    committed = wire(
        ApiKey.TXN_OFFSET_COMMIT,
        5,
        transactional_id=txn_id,
        group_id=group,
        producer_id=init.producer_id,
        producer_epoch=init.producer_epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    )
    assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
    state = described(wire, txn_id)
    assert state.transaction_state == "Ongoing"
    held = {(t.topic, p) for t in state.topics for p in t.partitions}
    assert {(topic, 0), (topic, 1)} < held
    assert any(name == "__consumer_offsets" for name, _ in held)
    ended = wire(
        ApiKey.END_TXN,
        5,
        transactional_id=txn_id,
        producer_id=init.producer_id,
        producer_epoch=init.producer_epoch,
        committed=True,
    )
    assert ended.error_code == ErrorCode.NONE
    # A record and a COMMIT marker in each partition; the offset visible with them.
    watermarks_reach(broker, topic, [2, 2])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        wait_for(
            lambda: consumer.committed([KafkaPartition(topic, 0)], TIMEOUT_S)[0].offset == 1,
            "the offset committed in the transaction",
        )
    finally:
        consumer.close()


def test_kafka_python_and_aiokafka_commit_and_abort(
    broker: BrokerProcess, wire: Callable[..., Any]
) -> None:
    topic = new_topic(broker, 1)
    kafka_python = KafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id=f"kafka-python-{topic}"
    )
    try:
        kafka_python.init_transactions()
        kafka_python.begin_transaction()
        kafka_python.send(topic, b"kept", partition=0)
        kafka_python.commit_transaction()
        kafka_python.begin_transaction()
        kafka_python.send(topic, b"dropped", partition=0)
        kafka_python.flush()
        kafka_python.abort_transaction()
    finally:
        kafka_python.close()

    async def aiokafka_transactions() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, transactional_id=f"aiokafka-{topic}"
        )
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"kept", partition=0)
            with contextlib.suppress(RuntimeError):
                async with producer.transaction():
                    await producer.send_and_wait(topic, b"dropped", partition=0)
                    raise RuntimeError("abort it")
        finally:
            await producer.stop()

    asyncio.run(aiokafka_transactions())
    # Four transactions of one record each, and each one's marker.
    watermarks_reach(broker, topic, [8])
    for client in ("kafka-python", "aiokafka"):
        assert described(wire, f"{client}-{topic}").transaction_state == "CompleteAbort"


def test_broker_to_broker_forms(broker: BrokerProcess, wire: Callable[..., Any]) -> None:
    """What brokers send each other: a marker for a partition this broker does not
    host is refused; the verify-only AddPartitionsToTxn names what is not in the
    transaction."""
    answer = wire(
        ApiKey.WRITE_TXN_MARKERS,
        1,
        markers=[
            {
                "producer_id": 7,
                "producer_epoch": 0,
                "transaction_result": True,
                "topics": [{"name": "no-such-topic", "partition_indexes": [0]}],
                "coordinator_epoch": 0,
            }
        ],
    )
    (partition,) = answer.markers[0].topics[0].partitions
    assert partition.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    topic = new_topic(broker, 1)
    txn_id = f"verify-{topic}"
    p = producer(broker, txn_id)
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    p.produce(topic, value=b"x", partition=0)
    p.flush(TIMEOUT_S)
    state = described(wire, txn_id)
    verified = wire(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        4,
        transactions=[
            {
                "transactional_id": txn_id,
                "producer_id": state.producer_id,
                "producer_epoch": state.producer_epoch,
                "verify_only": True,
                "topics": [{"name": topic, "partitions": [0, 1]}],
            }
        ],
    )
    (result,) = verified.results_by_transaction
    errors = {
        r.partition_index: r.partition_error_code
        for r in result.topic_results[0].results_by_partition
    }
    assert errors == {0: ErrorCode.NONE, 1: ErrorCode.TRANSACTION_ABORTABLE}
    # WriteTxnMarkers v2 (KIP-1228): a transaction version 2 marker at the epoch of the
    # open transaction is a late one of the transaction before; refused.
    late = wire(
        ApiKey.WRITE_TXN_MARKERS,
        2,
        markers=[
            {
                "producer_id": state.producer_id,
                "producer_epoch": state.producer_epoch,
                "transaction_result": True,
                "topics": [{"name": topic, "partition_indexes": [0]}],
                "coordinator_epoch": 0,
                "transaction_version": 2,
            }
        ],
    )
    (partition,) = late.markers[0].topics[0].partitions
    assert partition.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    p.abort_transaction(TIMEOUT_S)
