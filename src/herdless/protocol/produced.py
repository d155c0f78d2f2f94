"""What one partition's records in a Produce request may be, by request version.

Kafka's rules (ProduceRequest.validateRecords, LogValidator): v3 and later carry
exactly one v2 batch, and zstd only from v7; v0-v2 carry message sets (magic v0
or v1), up-converted here to the one v2 batch herdless stores, or a v2 batch.
Either way a partition gets one batch: a compressed message set is one wrapper.
"""

from __future__ import annotations

from herdless.protocol.errors import ErrorCode
from herdless.protocol.legacy_records import is_message_set, upconvert
from herdless.protocol.records import BatchHeader, Compression, InvalidBatch, split_batches

# The first Produce version that carries v2 batches only, and the first that may use zstd.
BATCHES_ONLY_VERSION = 3
ZSTD_VERSION = 7


def produced_batch(
    data: bytes | memoryview, api_version: int, *, max_batch_size: int, log_append_time: bool
) -> list[tuple[BatchHeader, memoryview]]:
    """The validated v2 batch to append; InvalidBatch with the producer's error otherwise.

    `log_append_time` is the topic's timestamp type, which decides whether an old
    producer's message claiming LogAppendTime is refused (legacy_records.upconvert).
    """
    if is_message_set(data):
        if api_version >= BATCHES_ONLY_VERSION:
            raise InvalidBatch(
                f"Produce v{api_version} must carry record batches (magic v2), not a message set",
                ErrorCode.INVALID_RECORD,
            )
        data = upconvert(data, log_append_time=log_append_time)
    batches = split_batches(data, max_batch_size)
    if len(batches) > 1:
        raise InvalidBatch(
            "a Produce request carries exactly one record batch per partition",
            ErrorCode.INVALID_RECORD,
        )
    header = batches[0][0]
    if (
        BATCHES_ONLY_VERSION <= api_version < ZSTD_VERSION
        and header.compression == Compression.ZSTD
    ):
        raise InvalidBatch(
            f"Produce v{api_version} must not use zstd (v{ZSTD_VERSION} and later may)",
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        )
    return batches
