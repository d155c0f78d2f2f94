"""What EndTxn does with the transaction it finds: Kafka's decision table, by itself.

Kafka picks the table by the client's transaction version (EndTxn v5 and later is
version 2), not by the cluster's:
- version 1: the producer's epoch must be the transaction's; Ongoing prepares, a
  Complete* state of the same result is a retry answered with no write, Empty and
  every other mismatch is INVALID_TXN_STATE.
- version 2 (KIP-890 part 2): each transaction ends at a bumped epoch, so a retry
  carries the epoch before the bump (or, after an epoch overflow, the previous producer
  id's last epoch); and an abort is accepted with no transaction open (the producer may
  not know whether one is), written as a PrepareAbort with nothing to mark:

    +----------------+-----------------+-----------------+
    |                | Abort           | Commit          |
    |                | Retry | Current | Retry | Current |
    | Empty          | PF    | EB      | PF    | ITS     |
    | CompleteAbort  | NONE  | EB      | ITS   | ITS     |
    | CompleteCommit | ITS   | EB      | NONE  | ITS     |

  (PF PRODUCER_FENCED, ITS INVALID_TXN_STATE, NONE no error and no write, EB the
  prepare with its epoch bump.)
"""

from __future__ import annotations

from dataclasses import dataclass

from herdless.coordinator.transactions.metadata import MAX_PRODUCER_EPOCH, TransactionMetadata
from herdless.coordinator.transactions.state import TransactionState
from herdless.protocol.errors import ErrorCode

S = TransactionState
E = ErrorCode


@dataclass(frozen=True, slots=True)
class Prepare:
    """Write PrepareCommit or PrepareAbort; `no_partition_added`: a version 2 abort with
    no transaction open, which starts and ends at once."""

    committed: bool
    no_partition_added: bool = False


@dataclass(frozen=True, slots=True)
class AlreadyEnded:
    """A retry of an EndTxn that went through: no error, nothing written."""


EndTxnDecision = Prepare | AlreadyEnded | ErrorCode


def end_txn_decision(
    meta: TransactionMetadata,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    epoch_bump: bool,
) -> EndTxnDecision:
    if epoch_bump:
        return _with_epoch_bump(meta, producer_id, producer_epoch, committed)
    if meta.producer_id != producer_id:
        return E.INVALID_PRODUCER_ID_MAPPING
    if producer_epoch != meta.producer_epoch:
        return E.PRODUCER_FENCED
    return _by_state(meta.state, committed)


def _by_state(state: TransactionState, committed: bool) -> EndTxnDecision:
    """Version 1's table, and version 2's for Ongoing and Prepare*."""
    wants = S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT
    preparing = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
    if state is S.ONGOING:
        return Prepare(committed)
    if state is wants:
        return AlreadyEnded()
    if state is preparing:
        return E.CONCURRENT_TRANSACTIONS
    return E.INVALID_TXN_STATE


def _with_epoch_bump(
    meta: TransactionMetadata, producer_id: int, producer_epoch: int, committed: bool
) -> EndTxnDecision:
    retry_on_bump = meta.producer_epoch == producer_epoch + 1
    retry_on_overflow = (
        meta.previous_producer_id == producer_id
        and producer_epoch == MAX_PRODUCER_EPOCH - 1
        and meta.producer_epoch == 0
    )
    current = producer_epoch == meta.producer_epoch
    state = meta.state
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        valid = retry_on_bump
    elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        valid = retry_on_bump or retry_on_overflow or current
    else:
        valid = current
    if meta.producer_id != producer_id and not retry_on_overflow:
        return E.INVALID_PRODUCER_ID_MAPPING
    if not valid:
        return E.PRODUCER_FENCED
    retry = retry_on_bump or retry_on_overflow
    if state is S.EMPTY:
        return E.INVALID_TXN_STATE if committed else Prepare(False, no_partition_added=True)
    if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        same = (state is S.COMPLETE_COMMIT) == committed
        if retry:
            return AlreadyEnded() if same else E.INVALID_TXN_STATE
        return E.INVALID_TXN_STATE if committed else Prepare(False, no_partition_added=True)
    return _by_state(state, committed)
