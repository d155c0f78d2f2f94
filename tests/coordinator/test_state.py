import pytest

from herdless.coordinator.state import (
    STATE_ANSWERS,
    VALID_PREVIOUS,
    GroupState,
    IllegalStateTransition,
    Op,
    can_rebalance,
    state_answer,
    transition,
)
from herdless.protocol.errors import ErrorCode

E, P, C, S, D = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

LEGAL = {
    (P, E),
    (S, P),
    (C, P),
    (E, P),
    (P, C),
    (C, S),
    (S, D),
    (P, D),
    (C, D),
    (E, D),
    (D, D),
}


@pytest.mark.parametrize("current", list(GroupState))
@pytest.mark.parametrize("target", list(GroupState))
def test_transition_table_is_kafkas(current: GroupState, target: GroupState) -> None:
    if (current, target) in LEGAL:
        assert transition("g", current, target) is target
    else:
        with pytest.raises(IllegalStateTransition):
            transition("g", current, target)


def test_names_are_kafkas() -> None:
    assert [str(s) for s in GroupState] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
    ]
    assert VALID_PREVIOUS[P] == {S, C, E}


def test_can_rebalance() -> None:
    assert [s for s in GroupState if can_rebalance(s)] == [E, C, S]


def test_state_answers() -> None:
    assert state_answer(Op.HEARTBEAT, P) is ErrorCode.REBALANCE_IN_PROGRESS
    assert state_answer(Op.HEARTBEAT, S) is ErrorCode.NONE
    assert state_answer(Op.OFFSET_COMMIT, C) is ErrorCode.REBALANCE_IN_PROGRESS
    assert state_answer(Op.DELETE_GROUP, S) is ErrorCode.NON_EMPTY_GROUP
    assert state_answer(Op.DELETE_GROUP, E) is ErrorCode.NONE
    for op in (Op.JOIN, Op.SYNC, Op.HEARTBEAT, Op.LEAVE, Op.OFFSET_COMMIT):
        assert STATE_ANSWERS[(op, D)] is ErrorCode.COORDINATOR_NOT_AVAILABLE
