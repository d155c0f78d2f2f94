"""Coordination through a log alone: the Marshal protocol as a client library.

Consumers of a group agree on who consumes which partition with no
coordinator: every decision is a message on a coordination topic, and every
reader derives the same world state from it. See docs/marshal.md.
"""

from herdless.marshal.consumer import Batch, MarshalConsumer, Mode, Record
from herdless.marshal.fairness import ClaimStrategy
from herdless.marshal.log import CoordinationLog, MarshalError, read_state
from herdless.marshal.marshaler import Marshaler
from herdless.marshal.messages import Kind, Message, decode, encode
from herdless.marshal.placement import coordinating_partition
from herdless.marshal.rationalizer import (
    Claim,
    ClaimKey,
    Entry,
    Freshness,
    Rationalizer,
    WorldState,
    rationalize,
)

__all__ = [
    "Batch",
    "Claim",
    "ClaimKey",
    "ClaimStrategy",
    "CoordinationLog",
    "Entry",
    "Freshness",
    "Kind",
    "MarshalConsumer",
    "MarshalError",
    "Marshaler",
    "Message",
    "Mode",
    "Rationalizer",
    "Record",
    "WorldState",
    "coordinating_partition",
    "decode",
    "encode",
    "rationalize",
    "read_state",
]
