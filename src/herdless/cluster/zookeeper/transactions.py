"""What a ZooKeeper transaction's results mean.

Conditional writes. Partition state is only ever written against the znode version the
writer read, and a controller's writes are also conditional on the version of
/controller_epoch it got when elected, both in one ZooKeeper transaction. So a deposed
controller, or a leader with a stale view of its partition, gets StateVersionConflict
(ControllerMoved for the former) and never overwrites a newer decision.
"""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)

from herdless.cluster.errors import ControllerMoved, StateVersionConflict

# How a transaction reports the operations that did not fail themselves.
_ROLLED_BACK = (RolledBackError, RuntimeInconsistency)


def first_failure(results: list[Any]) -> Exception | None:
    index = failed_index(results)
    return None if index is None else results[index]


def failed_index(results: list[Any]) -> int | None:
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(result, _ROLLED_BACK):
            return index
    return None


def check_committed(results: list[Any], doing: str, *, epoch_checked: bool) -> None:
    """Raise what a failed transaction means. Where there is a controller epoch check it
    is the first operation, so its failure means the controller moved."""
    index = failed_index(results)
    if index is None:
        return
    failure = results[index]
    if epoch_checked and index == 0:
        raise ControllerMoved(f"/controller_epoch moved on while {doing}") from failure
    if isinstance(failure, BadVersionError | NodeExistsError | NoNodeError):
        raise StateVersionConflict(f"{type(failure).__name__} while {doing}") from failure
    raise failure
