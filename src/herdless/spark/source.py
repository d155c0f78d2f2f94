"""The `herdless` data source: options checked here, work done by the readers and writers."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from herdless.spark.batch import HerdlessBatchReader
from herdless.spark.client import quiet_consumer, quiet_producer, require_topic, topic_partitions
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.fetch import speaks_plaintext
from herdless.spark.options import WriteOptions, read_options, write_options
from herdless.spark.schema import KAFKA_SCHEMA
from herdless.spark.stream import HerdlessStreamReader
from herdless.spark.writer import HerdlessStreamWriter, HerdlessWriter, check_write_schema


class HerdlessDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "herdless"

    def schema(self) -> StructType:
        # Spark asks for the schema at load(), for streams and batch reads alike:
        # the last moment to turn bad options or a bad broker into a plain error
        # before a query starts. Spark does not say here whether a stream or a
        # batch read follows, so this checks what both share; the reader created
        # next checks the rest.
        options = read_options(self.options, "any")
        consumer = quiet_consumer(options.connection, options.lookup_group)
        try:
            topic_partitions(consumer, options.connection, options.subscription)
        finally:
            consumer.close()
        if options.include_headers:
            return KAFKA_SCHEMA
        return StructType(KAFKA_SCHEMA.fields[:-1])

    def reader(self, schema: StructType) -> DataSourceReader:
        return HerdlessBatchReader(read_options(self.options, "batch"))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return HerdlessStreamReader(read_options(self.options, "stream"))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return HerdlessWriter(self._write_options(schema, stream=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return HerdlessStreamWriter(self._write_options(schema, stream=True))

    def _write_options(self, schema: StructType, stream: bool) -> WriteOptions:
        options = write_options(self.options)
        check_write_schema(schema, options)
        if options.exactly_once and not stream:
            raise HerdlessSparkError(
                "option transactionalIdPrefix applies to writeStream only: a batch write "
                "has no batch id to write once"
            )
        if options.exactly_once and not speaks_plaintext(options.connection):
            # The driver ends the tasks' transactions with wire.py, which is plaintext only.
            raise HerdlessSparkError(
                "option transactionalIdPrefix needs a plaintext connection for now "
                "(kafka.security.protocol PLAINTEXT)"
            )
        quiet_producer(options.connection).flush(0)
        if options.topic is not None:
            require_topic(options.connection, options.topic)
        return options
