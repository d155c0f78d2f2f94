"""Control records: the transaction markers a coordinator writes into a partition.

A control batch (the control bit of the attributes set, always transactional)
holds one record whose key says what kind of control record it is and whose
value carries the rest, as Kafka's ControlRecordType and EndTransactionMarker
lay them out:

    key    version int16 (0), type int16 (ABORT 0, COMMIT 1)
    value  version int16 (0), coordinator epoch int32

A reader tolerates newer versions (longer keys and values) as Kafka does; a
type it does not know is not a transaction marker.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from herdless.protocol import records
from herdless.protocol.records import CONTROL_FLAG, TRANSACTIONAL_FLAG, BatchHeader

CURRENT_KEY_VERSION = 0
CURRENT_VALUE_VERSION = 0

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


class InvalidControlRecord(ValueError):
    """A control record that is not a transaction marker Kafka would read."""


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    type: ControlRecordType
    coordinator_epoch: int

    @property
    def aborted(self) -> bool:
        return self.type is ControlRecordType.ABORT

    def key(self) -> bytes:
        return _KEY.pack(CURRENT_KEY_VERSION, self.type)

    def value(self) -> bytes:
        return _VALUE.pack(CURRENT_VALUE_VERSION, self.coordinator_epoch)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> EndTransactionMarker:
        """The marker a control record holds; InvalidControlRecord for any other."""
        if key is None or len(key) < _KEY.size:
            raise InvalidControlRecord("a control record key needs a version and a type")
        version, kind = _KEY.unpack_from(key)
        if version < 0:
            raise InvalidControlRecord(f"control record key version {version}")
        if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise InvalidControlRecord(f"control record type {kind} is not a transaction marker")
        if value is None or len(value) < _VALUE.size:
            raise InvalidControlRecord("an end transaction marker needs a version and an epoch")
        value_version, coordinator_epoch = _VALUE.unpack_from(value)
        if value_version < 0:
            raise InvalidControlRecord(f"end transaction marker version {value_version}")
        return cls(ControlRecordType(kind), coordinator_epoch)


def build_marker_batch(
    marker: EndTransactionMarker, producer_id: int, producer_epoch: int, timestamp_ms: int
) -> bytes:
    """The control batch of one marker, base offset 0, as a coordinator's WriteTxnMarkers
    has the partition leader write it (no sequence: markers are not producer writes)."""
    return records.encode_batch(
        [(timestamp_ms, marker.key(), marker.value())],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        flags=TRANSACTIONAL_FLAG | CONTROL_FLAG,
    )


def marker_of(batch: bytes | memoryview, header: BatchHeader) -> EndTransactionMarker:
    """The end transaction marker of a control batch (its first record, as Kafka reads it)."""
    if not header.is_control:
        raise InvalidControlRecord("not a control batch")
    try:
        first = next(records.iter_records(memoryview(batch), header), None)
    except records.InvalidBatch as exc:
        raise InvalidControlRecord(f"a control batch that does not parse: {exc}") from exc
    if first is None:
        raise InvalidControlRecord("a control batch without records")
    return EndTransactionMarker.decode(first.key, first.value)
