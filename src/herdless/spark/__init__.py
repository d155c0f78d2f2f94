"""A PySpark data source for Kafka-compatible brokers that joins consumer groups.

    import herdless.spark
    herdless.spark.register(spark)
    spark.readStream.format("herdless").option("kafka.bootstrap.servers", ...)

It takes the options of Spark's Kafka connector (docs/spark.md), so a job
written for format("kafka") runs with the format name changed.

Needs pyspark 4.x and pyarrow (`pip install 'herdless[spark]'`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from herdless.spark.errors import HerdlessSparkError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["HerdlessSparkError", "register"]


def register(spark: SparkSession) -> None:
    """Make format("herdless") available to readers and writers of this session."""
    from herdless.spark.source import HerdlessDataSource

    spark.dataSource.register(HerdlessDataSource)
