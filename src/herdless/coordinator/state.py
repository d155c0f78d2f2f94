"""The classic group's states, its legal transitions, and what each state answers.

Both tables live here so that reading this file is reading the protocol: a
transition not in VALID_PREVIOUS is a coordinator bug (Kafka throws
IllegalStateException), and a request arriving in a state that refuses it gets
its error code from STATE_ANSWERS, nowhere else.
"""

from __future__ import annotations

from enum import Enum

from herdless.protocol.errors import ErrorCode


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


# The states by short names, for the tables below and the classic group's handlers,
# which test them at every step.
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

# Kafka's ClassicGroupState: the states a group must be in to move to each state.
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    EMPTY: frozenset({PREPARING}),
    PREPARING: frozenset({STABLE, COMPLETING, EMPTY}),
    COMPLETING: frozenset({PREPARING}),
    STABLE: frozenset({COMPLETING}),
    DEAD: frozenset({STABLE, PREPARING, COMPLETING, EMPTY, DEAD}),
}


class IllegalStateTransition(RuntimeError):
    """The coordinator tried a transition Kafka forbids: a bug, never a client error."""


def transition(group_id: str, current: GroupState, target: GroupState) -> GroupState:
    if current not in VALID_PREVIOUS[target]:
        raise IllegalStateTransition(
            f"group {group_id!r} must be in one of "
            f"{sorted(str(s) for s in VALID_PREVIOUS[target])} to move to {target}, "
            f"not {current}"
        )
    return target


def can_rebalance(state: GroupState) -> bool:
    return state in VALID_PREVIOUS[PREPARING]


class Op(Enum):
    JOIN = "join"
    SYNC = "sync"
    HEARTBEAT = "heartbeat"
    LEAVE = "leave"
    OFFSET_COMMIT = "offset_commit"
    TXN_OFFSET_COMMIT = "txn_offset_commit"
    OFFSET_FETCH = "offset_fetch"
    OFFSET_DELETE = "offset_delete"
    DELETE_GROUP = "delete_group"


# What a state answers to a request that is otherwise valid (known member, right
# generation). Dead comes first for every membership request: the group is
# being removed, so the client should look for its coordinator again. Absent
# pairs mean the state lets the request through.
STATE_ANSWERS: dict[tuple[Op, GroupState], ErrorCode] = {
    (Op.JOIN, DEAD): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    (Op.SYNC, DEAD): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    (Op.SYNC, EMPTY): ErrorCode.UNKNOWN_MEMBER_ID,
    (Op.SYNC, PREPARING): ErrorCode.REBALANCE_IN_PROGRESS,
    (Op.HEARTBEAT, DEAD): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    (Op.HEARTBEAT, EMPTY): ErrorCode.UNKNOWN_MEMBER_ID,
    (Op.HEARTBEAT, PREPARING): ErrorCode.REBALANCE_IN_PROGRESS,
    (Op.LEAVE, DEAD): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    (Op.OFFSET_COMMIT, DEAD): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    (Op.OFFSET_COMMIT, COMPLETING): ErrorCode.REBALANCE_IN_PROGRESS,
    # A transaction's commit is not held to the group's state, but to its generation.
    (Op.TXN_OFFSET_COMMIT, DEAD): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    (Op.OFFSET_FETCH, DEAD): ErrorCode.GROUP_ID_NOT_FOUND,
    (Op.OFFSET_DELETE, DEAD): ErrorCode.GROUP_ID_NOT_FOUND,
    (Op.OFFSET_DELETE, PREPARING): ErrorCode.NON_EMPTY_GROUP,
    (Op.OFFSET_DELETE, COMPLETING): ErrorCode.NON_EMPTY_GROUP,
    (Op.OFFSET_DELETE, STABLE): ErrorCode.NON_EMPTY_GROUP,
    (Op.DELETE_GROUP, DEAD): ErrorCode.GROUP_ID_NOT_FOUND,
    (Op.DELETE_GROUP, PREPARING): ErrorCode.NON_EMPTY_GROUP,
    (Op.DELETE_GROUP, COMPLETING): ErrorCode.NON_EMPTY_GROUP,
    (Op.DELETE_GROUP, STABLE): ErrorCode.NON_EMPTY_GROUP,
}


def state_answer(op: Op, state: GroupState) -> ErrorCode:
    return STATE_ANSWERS.get((op, state), ErrorCode.NONE)
