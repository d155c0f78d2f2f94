"""The row layout of Spark's Kafka source, in Spark's and in Arrow's spelling.

Rows read from herdless look exactly like rows read with Spark's own Kafka
connector, so jobs move between the two without touching their projections.
The Arrow schema must match the Spark schema type for type (int32 partition,
microsecond UTC timestamps, nullable everything) or Spark rejects the batches.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADER_SPARK = StructType(
    [StructField("key", StringType(), True), StructField("value", BinaryType(), True)]
)

KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
        StructField("headers", ArrayType(HEADER_SPARK, True), True),
    ]
)

HEADER_ARROW = pa.struct([("key", pa.string()), ("value", pa.binary())])
HEADERS_ARROW = pa.list_(HEADER_ARROW)

KAFKA_ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", HEADERS_ARROW),
    ]
)


def arrow_schema(headers: bool) -> pa.Schema:
    """What executors yield: the headers column only when includeHeaders is true."""
    return KAFKA_ARROW_SCHEMA if headers else KAFKA_ARROW_SCHEMA.remove(7)


# Columns a writer understands; anything else is a mistake worth reporting.
WRITE_COLUMNS = ("key", "value", "headers", "partition", "topic")
