"""One local[2] SparkSession for the whole Spark test set, one broker per module.

Starting Spark costs ~10 s, so the session is shared; the settings are the
ones SPARK.md measured. If Spark cannot start, every test here fails: the data
source is not tested without it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess, module_broker

CONF_DIR = Path(__file__).parent / "conf"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    # Workers must run this interpreter (it has pyarrow and herdless), and the
    # JVM must find the quiet log4j settings, before the JVM starts.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["SPARK_CONF_DIR"] = str(CONF_DIR)
    from pyspark.sql import SparkSession

    import herdless.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("herdless-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    herdless.spark.register(session)
    yield session
    session.stop()


# Classic groups form at once (no initial rebalance delay); consumer-protocol members
# (KIP-848) heartbeat often and are let go after 6 s, as the classic members of
# these tests (kafka.session.timeout.ms=6000), so that partitions change hands quickly.
TEST_GROUP_SETTINGS = (
    "group.initial.rebalance.delay.ms=0",
    "group.consumer.session.timeout.ms=6000",
    "group.consumer.min.session.timeout.ms=1000",
    "group.consumer.heartbeat.interval.ms=500",
    "group.consumer.min.heartbeat.interval.ms=100",
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker whose groups form and rebalance quickly (TEST_GROUP_SETTINGS)."""
    data_dir = tmp_path_factory.mktemp("broker") / "data"
    settings = [arg for setting in TEST_GROUP_SETTINGS for arg in ("--set", setting)]
    with module_broker(data_dir, *settings) as process:
        yield process
