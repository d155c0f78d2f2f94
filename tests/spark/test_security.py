"""The source and sink over SASL_SSL, with the kafka.* options a Spark job written for
Spark's Kafka source passes: security.protocol, sasl.mechanism, sasl.jaas.config and a
PEM trust store. The planning side, the executors' reads and the writers all log in.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from herdless.testing.broker import HerdlessBroker
from herdless.testing.security import Security

PASSWORD = "spark-Secret-41d0"
ROWS = 2000


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HerdlessBroker]:
    security = Security(users={"spark": PASSWORD})
    with HerdlessBroker(tmp_path_factory.mktemp("spark-sasl") / "data", security=security) as b:
        yield b


def test_a_stream_reads_and_writes_over_sasl_ssl(spark, secured, tmp_path) -> None:
    secured.create_topic("sasl-in", partitions=2)
    secured.create_topic("sasl-out", partitions=2)
    plain = secured.client_settings("spark", mechanism="PLAIN").spark_options()
    scram = secured.client_settings("spark", mechanism="SCRAM-SHA-256").spark_options()
    assert plain["kafka.security.protocol"] == "SASL_SSL" and "kafka.sasl.jaas.config" in plain

    spark.range(ROWS).select(
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("value")
    ).write.format("herdless").options(**plain).option("topic", "sasl-in").mode("append").save()
    query = (
        spark.readStream.format("herdless")
        .options(**scram)
        .option("subscribe", "sasl-in")
        .option("group.id", "sasl-copier")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "500")
        .load()
        .select(F.upper(F.col("value").cast("string")).alias("value"))
        .writeStream.format("herdless")
        .options(**plain)
        .option("topic", "sasl-out")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None
    copied = secured.consume("sasl-out", ROWS, timeout=30)
    assert sorted(r.value for r in copied) == sorted(f"V{i}".encode() for i in range(ROWS))
    # The group's member committed as it went, over the same listener.
    assert sum(secured.committed("sasl-copier", "sasl-in").values()) == ROWS


def test_a_wrong_password_fails_the_read_naming_the_login(spark, secured) -> None:
    options = secured.client_settings("spark").spark_options()
    wrong = options["kafka.sasl.jaas.config"].replace(PASSWORD, "wrong")
    with pytest.raises(AnalysisException, match="(?i)authenticat"):
        spark.read.format("herdless").options(**options).option(
            "kafka.sasl.jaas.config", wrong
        ).option("subscribe", "sasl-in").option("connectTimeoutMs", "5000").load().collect()
