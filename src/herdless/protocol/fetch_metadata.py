"""A fetch session's id and epoch as the Fetch request carries them (KIP-227; Kafka's
FetchMetadata): shared by the broker's session cache and a follower's side of a session."""

from __future__ import annotations

INVALID_SESSION_ID = 0
# A full fetch at INITIAL_EPOCH asks for a new session; one at FINAL_EPOCH asks for none.
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: FINAL_EPOCH stays final, MAX_EPOCH wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == MAX_EPOCH:
        return 1
    return epoch + 1
