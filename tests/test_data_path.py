"""Produce, fetch and offsets as clients rely on them: idempotence, long polls, lookups, admin."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafka import KafkaAdminClient, KafkaProducer
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from tests.support.broker import BrokerProcess
from tests.support.wire import Wire


def batch(values: list[bytes], producer_id: int = -1, epoch: int = -1, sequence: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 20,
    )
    for i, value in enumerate(values):
        builder.append(i, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(builder.build())


def produce_partitions(
    wire: Wire, topic: str, records: dict[int, bytes], acks: int = -1
) -> list[Any]:
    """Produce v8 of {partition: records} of `topic` in one request: the partition answers."""
    Topic = ProduceRequest.TopicProduceData
    request = ProduceRequest[8](
        transactional_id=None,
        acks=acks,
        timeout_ms=10_000,
        topic_data=[
            Topic(
                name=topic,
                partition_data=[
                    Topic.PartitionProduceData(index=p, records=data) for p, data in records.items()
                ],
            )
        ],
    )
    return wire.call(request, ProduceResponse).responses[0].partition_responses


def produce_raw(wire: Wire, topic: str, records: bytes, acks: int = -1) -> Any:
    return produce_partitions(wire, topic, {0: records}, acks)[0]


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(30)


def consume_values(broker: BrokerProcess, topic: str, partitions: int = 1) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values = []
    while messages := consumer.consume(10_000, timeout=3):
        values += [m.value() for m in messages if m.error() is None]
    consumer.close()
    return values


def test_idempotent_retry_is_stored_once_and_gaps_are_refused(broker: BrokerProcess) -> None:
    create_topic(broker, "idem")
    wire = Wire(broker)
    init = wire.call(
        InitProducerIdRequest[2](transactional_id=None, transaction_timeout_ms=60_000),
        InitProducerIdResponse,
    )
    assert init.error_code == 0 and init.producer_id >= 0
    pid, epoch = init.producer_id, init.producer_epoch

    first = produce_raw(wire, "idem", batch([b"a", b"b"], pid, epoch, 0))
    assert (first.error_code, first.base_offset) == (0, 0)
    retry = produce_raw(wire, "idem", batch([b"a", b"b"], pid, epoch, 0))
    assert (retry.error_code, retry.base_offset) == (0, 0), "a retry must get the original offset"
    gap = produce_raw(wire, "idem", batch([b"c"], pid, epoch, 5))
    assert gap.error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    following = produce_raw(wire, "idem", batch([b"c"], pid, epoch, 2))
    assert (following.error_code, following.base_offset) == (0, 2)
    wire.close()
    assert consume_values(broker, "idem") == [b"a", b"b", b"c"]


def test_producer_ids_are_unique(broker: BrokerProcess) -> None:
    wire = Wire(broker)
    ids = {
        wire.call(
            InitProducerIdRequest[1](transactional_id=None, transaction_timeout_ms=1000),
            InitProducerIdResponse,
        ).producer_id
        for _ in range(50)
    }
    wire.close()
    assert len(ids) == 50


def test_idempotent_clients_produce_exactly_once(broker: BrokerProcess) -> None:
    create_topic(broker, "idem-clients", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(5000):
        producer.produce("idem-clients", key=str(i).encode(), value=b"ck-%d" % i)
    assert producer.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    futures = [kp.send("idem-clients", key=b"%d" % i, value=b"kp-%d" % i) for i in range(5000)]
    kp.flush(30)
    assert all(f.get(0) for f in futures)
    kp.close()
    values = consume_values(broker, "idem-clients", 2)
    assert sorted(values) == sorted(
        [b"ck-%d" % i for i in range(5000)] + [b"kp-%d" % i for i in range(5000)]
    )


def test_acks_0_gets_no_answer_but_is_stored(broker: BrokerProcess) -> None:
    create_topic(broker, "fire-and-forget")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=0)
    for i in range(100):
        producer.send("fire-and-forget", value=b"%d" % i)
    producer.flush(10)
    producer.close()
    deadline = time.monotonic() + 10
    values: list[bytes] = []
    while len(values) < 100 and time.monotonic() < deadline:
        values = consume_values(broker, "fire-and-forget")
    assert values == [b"%d" % i for i in range(100)]


def fetch_request(
    topic: str,
    offsets: dict[int, int],
    max_wait_ms: int,
    min_bytes: int,
    *,
    version: int = 11,
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: tuple[int, ...] = (),
) -> Any:
    """Fetch of `topic` from {partition: offset}; by default v11 with no fetch session.

    From v13 topics go by id: set the request's topics[0].topic_id (and the forgotten
    topic's) before sending.
    """
    Topic = FetchRequest.FetchTopic
    Forgotten = FetchRequest.ForgottenTopic
    partitions = [
        Topic.FetchPartition(
            partition=partition,
            current_leader_epoch=-1,
            fetch_offset=offset,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        for partition, offset in offsets.items()
    ]
    return FetchRequest[version](
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=[Topic(topic=topic, partitions=partitions)] if partitions else [],
        forgotten_topics_data=[Forgotten(topic=topic, partitions=list(forgotten))]
        if forgotten
        else [],
        rack_id="",
    )


def test_fetch_long_poll_is_woken_by_an_append(broker: BrokerProcess) -> None:
    create_topic(broker, "long-poll")
    wire = Wire(broker)
    request = fetch_request("long-poll", {0: 0}, max_wait_ms=20_000, min_bytes=1)

    def produce_later() -> None:
        time.sleep(1.0)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("long-poll", value=b"wake up")
        producer.flush(10)

    threading.Thread(target=produce_later).start()
    started = time.monotonic()
    response = wire.call(request, FetchResponse)
    waited = time.monotonic() - started
    wire.close()
    partition = response.responses[0].partitions[0]
    assert partition.error_code == 0
    assert partition.high_watermark == 1
    assert b"wake up" in partition.records
    # The fetch parked (it did not answer empty at once) and the append woke it long
    # before its 20 s max wait ran out.
    assert 0.5 < waited < 15


def test_a_request_sent_behind_a_waiting_fetch_cuts_its_wait_short(broker: BrokerProcess) -> None:
    """librdkafka asks for a group's coordinator on a connection it fetches on. Were the
    question to wait out the Fetch's long poll, every lookup while a coordinator moves
    would take fetch.wait.max.ms (500 ms), and librdkafka then marks the coordinator it
    found dead and asks again. The Fetch answers as soon as a request waits behind it,
    with what there is, and answers still leave in request order."""
    create_topic(broker, "cut-short")
    wire = Wire(broker)
    fetch = fetch_request("cut-short", {0: 0}, max_wait_ms=20_000, min_bytes=1)
    question = FindCoordinatorRequest[2](key="cut-short-group", key_type=0)
    wire.send(fetch)
    time.sleep(0.5)  # the Fetch has parked
    started = time.monotonic()
    wire.send(question)
    fetched = wire.receive(fetch, FetchResponse, behind=1)
    answered = wire.receive(question, FindCoordinatorResponse)
    waited = time.monotonic() - started
    # Pipelined with the Fetch, in the same write: answered at once, too.
    wire.send(fetch)
    wire.send(question)
    wire.receive(fetch, FetchResponse, behind=1)
    wire.receive(question, FindCoordinatorResponse)
    both_at_once = time.monotonic() - started - waited
    wire.close()
    partition = fetched.responses[0].partitions[0]
    assert (partition.error_code, partition.high_watermark) == (0, 0)
    assert answered.error_code == 0
    assert waited < 5, f"the question waited {waited:.1f} s behind the Fetch"
    assert both_at_once < 5, f"sent together, they took {both_at_once:.1f} s"


def test_fetch_out_of_range_and_unknown_partition(broker: BrokerProcess) -> None:
    create_topic(broker, "ranges")
    wire = Wire(broker)
    request = fetch_request("ranges", {0: 500, 7: 0}, max_wait_ms=0, min_bytes=0)
    partitions = wire.call(request, FetchResponse).responses[0].partitions
    wire.close()
    assert [p.error_code for p in partitions] == [
        1,
        3,
    ]  # OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION


def test_the_leader_epoch_ends_at_the_log_end_even_before_anything_is_written(
    broker: BrokerProcess,
) -> None:
    # librdkafka checks its position this way after reconnecting; an UNDEFINED answer
    # made it reset to the log end and skip what was appended meanwhile.
    create_topic(broker, "epochs", 1)
    wire = Wire(broker)
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    request = OffsetForLeaderEpochRequest[4](
        replica_id=-1,
        topics=[
            Topic(
                topic="epochs",
                partitions=[
                    Topic.OffsetForLeaderPartition(
                        partition=0, current_leader_epoch=0, leader_epoch=0
                    )
                ],
            )
        ],
    )
    try:
        [empty] = wire.call(request, OffsetForLeaderEpochResponse).topics[0].partitions
        assert (empty.error_code, empty.leader_epoch, empty.end_offset) == (0, 0, 0)
        produce_raw(wire, "epochs", batch([b"a", b"b"]))
        [written] = wire.call(request, OffsetForLeaderEpochResponse).topics[0].partitions
        assert (written.error_code, written.leader_epoch, written.end_offset) == (0, 0, 2)
    finally:
        wire.close()


def test_list_offsets_earliest_latest_and_by_time(broker: BrokerProcess) -> None:
    create_topic(broker, "times")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(10):
        producer.produce("times", value=b"%d" % i, timestamp=base + i * 1000)
        producer.flush(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "times"})
    low, high = consumer.get_watermark_offsets(TopicPartition("times", 0), timeout=10)
    assert (low, high) == (0, 10)
    found = consumer.offsets_for_times([TopicPartition("times", 0, base + 4500)], timeout=10)
    assert found[0].offset == 5
    late = consumer.offsets_for_times([TopicPartition("times", 0, base + 99_000)], timeout=10)
    assert late[0].offset == -1  # no record that late: the end
    consumer.close()


def test_admin_configs_partitions_and_cluster(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(broker, "admin-t", 2, **{"retention.ms": "60000", "cleanup.policy": "delete"})
    described = admin.describe_configs([ConfigResource("topic", "admin-t")])
    configs = next(iter(described.values())).result(30)
    assert configs["retention.ms"].value == "60000"
    assert not configs["retention.ms"].is_default
    assert configs["segment.bytes"].value == "1073741824"

    admin.create_partitions([NewPartitions("admin-t", 5)])["admin-t"].result(30)
    metadata = admin.list_topics("admin-t", timeout=10)
    assert len(metadata.topics["admin-t"].partitions) == 5
    with pytest.raises(KafkaException, match="INVALID_PARTITIONS|partitions"):
        admin.create_partitions([NewPartitions("admin-t", 3)])["admin-t"].result(30)

    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS|already exists"):
        admin.create_topics([NewTopic("admin-t", 1, 1)])["admin-t"].result(30)
    with pytest.raises(KafkaException, match="INVALID_CONFIG|retention.ms"):
        admin.create_topics([NewTopic("bad-config", 1, 1, config={"retention.ms": "soon"})])[
            "bad-config"
        ].result(30)
    with pytest.raises(KafkaException, match="INVALID_REPLICATION_FACTOR|replication"):
        admin.create_topics([NewTopic("three-copies", 1, 3)])["three-copies"].result(30)

    cluster = admin.describe_cluster().result(30)
    assert [node.port for node in cluster.nodes] == [broker.port]
    assert cluster.cluster_id

    admin.delete_topics(["admin-t"])["admin-t"].result(30)
    assert "admin-t" not in admin.list_topics(timeout=10).topics


def test_invalid_topic_name_is_refused(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException, match="INVALID_TOPIC|topic name"):
        admin.create_topics([NewTopic("no spaces/allowed", 1, 1)])["no spaces/allowed"].result(30)


def test_flush_every_message_topic(broker: BrokerProcess) -> None:
    """flush.messages=1: each answer waits for an fsync, which concurrent producers share."""
    create_topic(broker, "synced", 1, **{"flush.messages": "1"})
    producers = [
        Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) for _ in range(4)
    ]
    for i in range(400):
        producers[i % 4].produce("synced", value=b"%d" % i)
    for producer in producers:
        assert producer.flush(30) == 0
    assert sorted(consume_values(broker, "synced")) == sorted(b"%d" % i for i in range(400))


def test_delete_records_moves_the_start_for_readers(broker: BrokerProcess) -> None:
    create_topic(broker, "trimmed", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("trimmed", b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def delete(*wanted: TopicPartition) -> dict[int, Any]:
        futures = admin.delete_records(list(wanted))
        out = {}
        for tp, future in futures.items():
            try:
                out[tp.partition] = future.result(30).low_watermark
            except KafkaException as exc:
                out[tp.partition] = exc.args[0].code()
        return out

    assert delete(TopicPartition("trimmed", 0, 4), TopicPartition("trimmed", 1, 0)) == {0: 4, 1: 0}
    assert consume_values(broker, "trimmed") == [b"%d" % i for i in range(4, 10)]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
    assert consumer.get_watermark_offsets(TopicPartition("trimmed", 0), timeout=10) == (4, 10)
    consumer.close()
    # Past the high watermark is refused; -1 means up to it.
    assert delete(TopicPartition("trimmed", 0, 11)) == {0: KafkaError.OFFSET_OUT_OF_RANGE}
    assert delete(TopicPartition("trimmed", 0, -1)) == {0: 10}
    assert consume_values(broker, "trimmed") == []
    internal = delete(TopicPartition("__consumer_offsets", 0, -1))
    assert internal == {0: KafkaError.TOPIC_EXCEPTION}


def test_describe_log_dirs_reports_partition_sizes(broker: BrokerProcess) -> None:
    create_topic(broker, "sized", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(50):
        producer.produce("sized", b"v" * 200, partition=0)
    assert producer.flush(30) == 0
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        [answer] = admin.describe_log_dirs(topic_partitions={"sized": [0, 1], "absent": [0]})
    finally:
        admin.close()
    [log_dir] = answer["log_dirs"]
    assert log_dir["error_code"] == 0
    assert Path(log_dir["log_dir"]) == broker.data_dir.resolve()
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    [topic] = log_dir["topics"]  # the absent topic is left out, as Kafka does
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    on_disk = {
        p: sum(f.stat().st_size for f in (broker.data_dir / f"sized-{p}").glob("*.log"))
        for p in (0, 1)
    }
    assert sizes == on_disk and sizes[0] > 50 * 200 and sizes[1] == 0
