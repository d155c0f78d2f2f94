"""Bad options, missing topics and unreachable brokers fail at load(), save() or start()
with a message that names the problem, never a hang."""

from __future__ import annotations

import time

import pytest
from pyspark.errors import AnalysisException, StreamingQueryException

from tests.spark.kafka import create_topic
from tests.support.broker import free_port


@pytest.fixture(scope="module")
def topic(broker) -> str:
    create_topic(broker.bootstrap, "bad-input", 2)
    return "bad-input"


def _load(spark, **options: str):
    return spark.read.format("herdless").options(**options).load()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bogus": "1"}, "unknown option 'bogus'"),
        ({"subscribePattern": "bad-.*"}, "exactly one of the options subscribe"),
        ({"group.id": "a", "kafka.group.id": "b"}, "group.id .* and kafka.group.id .* conflict"),
        ({"kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit is not supported"),
        ({"startingOffsets": '{"bad-input": {"0": 1'}, "startingOffsets is neither .* JSON"),
        ({"startingOffsets": '{"bad-input": {"0": "x"}}'}, "must be an integer"),
        ({"endingOffsets": '{"other": {"0": 5}}'}, "names other-0, which this reader does not"),
        ({"assign": '{"bad-input": [0]}'}, "set exactly one .*set: subscribe and assign"),
        ({"kafka.auto.offset.reset": "earliest"}, "auto.offset.reset is not supported"),
        ({"kafka.ssl.truststore.location": "/x.jks"}, "Java TrustStores are not supported"),
    ],
)
def test_bad_read_options_fail_at_load(spark, broker, topic, options, message) -> None:
    with pytest.raises(AnalysisException, match=message):
        _load(spark, **{"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, **options})


def test_missing_topic_fails_at_load(spark, broker) -> None:
    with pytest.raises(AnalysisException, match="topic no-such-topic does not exist"):
        _load(spark, **{"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "no-such-topic"})


def test_unreachable_broker_fails_at_load_naming_the_address(spark) -> None:
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(AnalysisException, match=f"no Kafka broker answered at {address} within 2s"):
        _load(
            spark,
            **{"kafka.bootstrap.servers": address, "subscribe": "t", "connectTimeoutMs": "2000"},
        )
    assert time.monotonic() - started < 60  # bounded, not a hang


def test_missing_assigned_partition_fails_at_load(spark, broker, topic) -> None:
    with pytest.raises(AnalysisException, match="assign names partition bad-input-7, which"):
        _load(
            spark,
            **{"kafka.bootstrap.servers": broker.bootstrap, "assign": '{"bad-input": [0, 7]}'},
        )


def test_stream_with_ending_offsets_fails_at_start(spark, broker, topic, tmp_path) -> None:
    frame = (
        spark.readStream.format("herdless")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("endingOffsets", "latest")
        .load()
    )
    query = frame.writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start()
    with pytest.raises(StreamingQueryException, match="ending offsets are not valid in streaming"):
        query.awaitTermination(60)


@pytest.mark.parametrize(
    ("columns", "options", "message"),
    [
        ("cast(id as string) as key", {"topic": "bad-input"}, "needs a value column"),
        ("cast(id as string) as value, id", {"topic": "bad-input"}, "column id cannot be written"),
        ("cast(id as string) as value", {}, "set the option topic or write a topic column"),
        ("cast(id as string) as value", {"topic": "absent"}, "topic absent does not exist"),
        ("cast(id as string) as value", {"topic": "bad-input", "subscribe": "x"}, "unknown option"),
        ("id as value", {"topic": "bad-input"}, "column value must be binary or string"),
        (
            "cast(id as string) as value",
            {"topic": "bad-input", "transactionalIdPrefix": "p"},
            "transactionalIdPrefix applies to writeStream only",
        ),
    ],
)
def test_bad_writes_fail_at_save(spark, broker, topic, columns, options, message) -> None:
    frame = spark.range(3).selectExpr(*columns.split(", "))
    with pytest.raises(AnalysisException, match=message):
        frame.write.format("herdless").option("kafka.bootstrap.servers", broker.bootstrap).options(
            **options
        ).mode("append").save()


def test_exactly_once_over_tls_or_sasl_fails_at_start(spark, broker, topic, tmp_path) -> None:
    frame = spark.readStream.format("rate").load().selectExpr("cast(value as string) as value")
    writer = (
        frame.writeStream.format("herdless")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("kafka.security.protocol", "SASL_PLAINTEXT")
        .option("kafka.sasl.mechanism", "PLAIN")
        .option("kafka.sasl.username", "u")
        .option("kafka.sasl.password", "p")
        .option("topic", topic)
        .option("transactionalIdPrefix", "p")
        .option("checkpointLocation", str(tmp_path))
    )
    with pytest.raises(Exception, match="transactionalIdPrefix needs a plaintext connection"):
        query = writer.start()
        query.awaitTermination(60)
