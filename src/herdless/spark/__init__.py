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
    """Make format("herdless") available to readers and writers of this session.

    In local mode the source's Python processes start through herdless-spark-python,
    which spares each of them compiling PySpark again from its zip (python_exec.py).
    """
    from herdless.spark.python_exec import script_for
    from herdless.spark.source import HerdlessDataSource

    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect has no SparkContext here: Spark starts its Python
        context = None
    script = None if context is None else script_for(context.pythonExec, context.master)
    if context is None or script is None:
        spark.dataSource.register(HerdlessDataSource)
        return
    # The registration records the executable Spark will start for this source alone.
    python_exec = context.pythonExec
    context.pythonExec = script
    try:
        spark.dataSource.register(HerdlessDataSource)
    finally:
        context.pythonExec = python_exec
