"""A transaction's states and the transitions between them: reading this file is reading
the protocol (Kafka's TransactionState).

The id of each state is what `__transaction_state` stores (TransactionStatus), and its
name is what DescribeTransactions and ListTransactions show.
"""

from __future__ import annotations

import enum


class IllegalTransition(RuntimeError):
    """A transition the table below does not allow: a bug in the coordinator, never an
    answer to a client (those are error codes, decided before any transition)."""


class TransactionState(enum.Enum):
    # No transaction open: after InitProducerId, or once a Complete* state is written.
    EMPTY = 0
    # Partitions (or a group's offsets) were added: a transaction is open.
    ONGOING = 1
    # EndTxn asked to commit; the markers are being written to every partition.
    PREPARE_COMMIT = 2
    # EndTxn asked to abort, or the coordinator did (timeout, a new producer's fence).
    PREPARE_ABORT = 3
    # Every marker is written.
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    # The transactional id expired and is being removed.
    DEAD = 6
    # A new producer fences an open transaction: the epoch is bumped, then it aborts.
    # Kafka never writes it; it is the step between Ongoing and PrepareAbort.
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """Kafka's name for the state, as DescribeTransactions reports it."""
        return _NAMES[self]

    @property
    def expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may expire: not while a
        transaction is open or its markers are being written."""
        return self in _EXPIRABLE

    @property
    def transaction_in_progress(self) -> bool:
        return self in (
            TransactionState.ONGOING,
            TransactionState.PREPARE_COMMIT,
            TransactionState.PREPARE_ABORT,
        )

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        try:
            return cls(state_id)
        except ValueError:
            raise ValueError(f"unknown transaction state id {state_id}") from None


S = TransactionState

_NAMES = {
    S.EMPTY: "Empty",
    S.ONGOING: "Ongoing",
    S.PREPARE_COMMIT: "PrepareCommit",
    S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit",
    S.COMPLETE_ABORT: "CompleteAbort",
    S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

_EXPIRABLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})

# For each state, the states a transaction may come to it from.
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # From Empty and Complete* too with transaction version 2: a producer unsure whether
    # a transaction is open aborts anyway (end_txn.py).
    S.PREPARE_ABORT: frozenset(
        {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    ),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def check_transition(current: TransactionState, target: TransactionState) -> None:
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalTransition(
            f"a transaction cannot go from {current.state_name} to {target.state_name}"
        )
