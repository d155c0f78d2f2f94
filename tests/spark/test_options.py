"""Spark's Kafka source options as read_options takes them, without Spark: defaults, the
errors Spark's connector raises for the same conditions, and what kafka.* settings become."""

from __future__ import annotations

import pytest

from herdless.spark.client_config import WireSettings, librdkafka_settings
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.options import read_options, write_options

BASE = {"kafka.bootstrap.servers": "h:1", "subscribe": "a, b"}


def _read(mode: str = "stream", **options: str):
    return read_options({**BASE, **options}, mode)  # type: ignore[arg-type]


def test_defaults_are_sparks() -> None:
    stream = _read(**{"kafka.session.timeout.ms": "6000"})
    assert stream.subscription.topics == ("a", "b")
    assert stream.starting.named == "latest" and not stream.include_headers
    assert stream.fail_on_data_loss and stream.max_trigger_delay_s == 15 * 60
    assert stream.connection.client == {"session.timeout.ms": "6000"}
    # Without kafka.group.id a stream reads every partition itself, as Spark's does.
    assert stream.group_id is None and not stream.joins_group
    assert stream.lookup_group == "spark-kafka-source-lookup"
    assert _read(**{"kafka.group.id": "g"}).joins_group
    assert _read("batch").starting.named == "earliest"
    assigned = read_options(
        {"kafka.bootstrap.servers": "h:1", "assign": '{"t": [2, 0], "u": [1]}', "group.id": "g"},
        "stream",
    )
    assert assigned.subscription.assigned == (("t", 0), ("t", 2), ("u", 1))
    assert not assigned.joins_group  # assign never joins, even with a group id


def test_time_and_count_options() -> None:
    options = _read(
        maxOffsetsPerTrigger="500",
        minOffsetsPerTrigger="100",
        maxTriggerDelay="30s",
        minPartitions="8",
        maxRecordsPerPartition="1000",
        startingTimestamp="1700000000000",
        startingOffsetsByTimestampStrategy="LATEST",
    )
    assert (options.max_offsets_per_trigger, options.min_offsets_per_trigger) == (500, 100)
    assert options.max_trigger_delay_s == 30
    assert (options.min_partitions, options.max_records_per_partition) == (8, 1000)
    assert options.starting.timestamp == 1_700_000_000_000
    assert options.starting.latest_when_no_match
    assert _read(maxTriggerDelay="250ms").max_trigger_delay_s == 0.25
    assert _read(maxTriggerDelay="2m").max_trigger_delay_s == 120
    assert _read(maxTriggerDelay="1500").max_trigger_delay_s == 1.5  # no unit: milliseconds


BAD_READS = [
    ({"subscribe": None}, "stream", "set exactly one of the options subscribe.*set: none"),
    ({"assign": '{"a": [0]}'}, "stream", "set exactly one .*set: subscribe and assign"),
    ({"subscribe": " , "}, "stream", "option subscribe names no topic"),
    ({"subscribe": None, "subscribepattern": " "}, "stream", "subscribePattern is empty"),
    ({"subscribe": None, "assign": "a:0"}, "stream", "option assign must be JSON"),
    ({"subscribe": None, "assign": '{"a": "0"}'}, "stream", "must map to a list of partition"),
    ({"subscribe": None, "assign": "{}"}, "stream", "option assign names no partition"),
    ({"kafka.bootstrap.servers": None}, "stream", "kafka.bootstrap.servers is required"),
    ({"kafka.auto.offset.reset": "earliest"}, "stream", "auto.offset.reset .* startingOffsets"),
    ({"kafka.key.deserializer": "x"}, "batch", "kafka.key.deserializer is not supported"),
    ({"kafka.value.deserializer": "x"}, "batch", "kafka.value.deserializer is not supported"),
    ({"kafka.enable.auto.commit": "true"}, "stream", "kafka.enable.auto.commit is not supported"),
    ({"kafka.interceptor.classes": "x"}, "stream", "kafka.interceptor.classes is not supported"),
    ({"endingoffsets": "latest"}, "stream", "ending offsets are not valid in streaming"),
    ({"endingtimestamp": "5"}, "stream", "ending offsets are not valid in streaming"),
    ({"startingoffsets": "latest"}, "batch", "startingOffsets latest .* not valid for batch"),
    ({"startingoffsets": '{"a": {"0": -1}}'}, "batch", "startingOffsets latest .* not valid"),
    ({"endingoffsets": "earliest"}, "batch", "endingOffsets 'earliest' is not valid"),
    ({"endingoffsets": '{"a": {"0": -2}}'}, "batch", "-2 of a-0 is not an offset"),
    ({"startingoffsets": "committed"}, "batch", "committed needs the option kafka.group.id"),
    (
        {"minoffsetspertrigger": "10", "maxoffsetspertrigger": "5"},
        "stream",
        r"minOffsetsPerTrigger \(10\) is higher than maxOffsetsPerTrigger \(5\)",
    ),
    ({"minpartitions": "0"}, "batch", "minpartitions must be positive"),
    ({"maxrecordsperpartition": "x"}, "batch", "must be a whole number"),
    ({"maxtriggerdelay": "soon"}, "stream", "maxtriggerdelay must be a time such as 30s"),
    ({"startingtimestamp": "yesterday"}, "stream", "one timestamp in milliseconds"),
    ({"startingoffsetsbytimestampstrategy": "x"}, "stream", "must be error or latest"),
    ({"startingoffsetsbytimestamp": '{"a": {"0": -5}}'}, "stream", "timestamp -5 of a-0"),
    ({"includeheaders": "yes"}, "stream", "Invalid value yes for configuration includeheaders"),
    ({"startingoffsets": '{"other": {"0": 1}}'}, "stream", "names other-0, which this reader"),
    (
        {"startingoffsets": '{"a": {"0": 1}}', "endingoffsets": '{"a": {"1": 5}}'},
        "batch",
        "must name the same partitions: a-0 against a-1",
    ),
    (
        {"startingoffsets": '{"a": {"0": 9}}', "endingoffsets": '{"a": {"0": 5}}'},
        "batch",
        r"startingOffsets of a-0 \(9\) is past its endingOffsets \(5\)",
    ),
    ({"group.id": "a", "kafka.group.id": "b"}, "stream", "group.id .* kafka.group.id .* conflict"),
    ({"bogus": "1"}, "stream", "unknown option 'bogus'"),
    ({"topic": "a"}, "stream", "topic names the topic to write to"),
    ({"transactionalIdPrefix": "p"}, "stream", "transactionalIdPrefix makes streaming writes"),
]


@pytest.mark.parametrize(("options", "mode", "message"), BAD_READS)
def test_bad_read_options_are_refused_as_spark_refuses_them(options, mode, message) -> None:
    given = {k: v for k, v in {**BASE, **options}.items() if v is not None}
    with pytest.raises(HerdlessSparkError, match=message):
        read_options(given, mode)


def test_spark_stream_options_are_accepted_and_ignored_in_batch_reads() -> None:
    options = _read(
        "batch", maxOffsetsPerTrigger="5", minOffsetsPerTrigger="1", maxTriggerDelay="1s"
    )
    assert options.subscription.topics == ("a", "b")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"kafka.key.serializer": "x"}, "kafka.key.serializer is not supported"),
        ({"kafka.value.serializer": "x"}, "kafka.value.serializer is not supported"),
        ({"kafka.enable.idempotence": "false"}, "enable.idempotence=false is not supported"),
        ({"kafka.enable.idempotence": "sure"}, "value sure for configuration kafka.enable.idem"),
        ({"kafka.partitioner.class": "x.Y"}, "names a Java class"),
        ({"topic": "no good"}, "'no good' is not a valid topic name"),
        ({"kafka.transactional.id": "t"}, "set the option transactionalIdPrefix"),
        ({"transactionalIdPrefix": "p"}, "transactionalIdPrefix .* needs the option topic"),
        ({"transactionalIdPrefix": " ", "topic": "t"}, "transactionalIdPrefix must not be empty"),
    ],
)
def test_bad_write_options_are_refused(options, message) -> None:
    with pytest.raises(HerdlessSparkError, match=message):
        write_options({"kafka.bootstrap.servers": "h:1", **options})


def test_write_options_take_sparks_producer_settings() -> None:
    options = write_options(
        {"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.enable.idempotence": "true"}
    )
    config = options.connection.producer_config()
    # Keys land in the partition Java's producer (Spark's sink) would choose.
    assert config["partitioner"] == "murmur2_random" and config["enable.idempotence"] is True
    assert not options.exactly_once


def test_transactional_id_prefix_makes_a_write_exactly_once() -> None:
    options = write_options(
        {"kafka.bootstrap.servers": "h:1", "topic": "t", "transactionalIdPrefix": " enrich "}
    )
    assert options.exactly_once and options.transactional_id_prefix == "enrich"


def test_java_client_settings_become_librdkafka_settings() -> None:
    config = librdkafka_settings(
        {
            "fetch.max.wait.ms": "100",
            "receive.buffer.bytes": "65536",
            "max.request.size": "2000000",
            "default.api.timeout.ms": "60000",
            "metric.reporters": "",
            "max.poll.records": "500",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="spark" password="s3 cret";'
            ),
        }
    )
    assert config == {
        "fetch.wait.max.ms": "100",
        "socket.receive.buffer.bytes": "65536",
        "message.max.bytes": "2000000",
        "max.poll.records": "500",  # librdkafka has it (and ignores it)
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "spark",
        "sasl.password": "s3 cret",
    }
    keytab = librdkafka_settings(
        {
            "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
            'useKeyTab=true keyTab="/etc/spark.keytab" principal="spark@EXAMPLE.COM";'
        }
    )
    assert keytab == {
        "sasl.kerberos.keytab": "/etc/spark.keytab",
        "sasl.kerberos.principal": "spark@EXAMPLE.COM",
    }
    with pytest.raises(HerdlessSparkError, match="login module .*OAuthBearerLoginModule"):
        librdkafka_settings(
            {
                "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
                "OAuthBearerLoginModule required;"
            }
        )


def test_plaintext_executor_reads_take_their_settings_from_java_or_librdkafka_names() -> None:
    settings = WireSettings.from_client(
        {
            "client.id": "etl",
            "isolation.level": "read_uncommitted",
            "fetch.max.bytes": "1048576",
            "max.partition.fetch.bytes": "524288",
            "fetch.wait.max.ms": "50",
            "receive.buffer.bytes": "131072",
        }
    )
    assert settings == WireSettings("etl", "read_uncommitted", 1048576, 524288, 50, 131072)
    assert WireSettings.from_client({}).isolation_level == "read_committed"
