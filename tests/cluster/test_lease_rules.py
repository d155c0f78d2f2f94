"""The lease's rules with a fake clock: credited from send time, per session."""

from __future__ import annotations

import math

from herdless.cluster.lease import SessionLease


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lease(clock: Clock) -> SessionLease:
    granted = SessionLease(margin=0.1, clock=clock)
    granted.session_timeout = 10.0
    return granted


def test_an_answer_credits_the_send_time_not_the_answer_time() -> None:
    clock = Clock()
    session = lease(clock)
    sent = session.sending(7)
    clock.now += 6.0  # stopped, or the answer was slow
    session.answered(sent, 7)
    assert session.deadline(7) == 100.0 + 9.0
    assert clock.now < session.deadline(7)
    clock.now += 3.1
    assert clock.now > session.deadline(7)


def test_an_older_request_answered_later_never_moves_the_lease_back() -> None:
    clock = Clock()
    session = lease(clock)
    early = session.sending(7)
    clock.now += 2.0
    late = session.sending(7)
    session.answered(late, 7)
    session.answered(early, 7)
    assert session.deadline(7) == 102.0 + 9.0


def test_no_lease_before_an_answer_or_before_the_timeout_is_known() -> None:
    clock = Clock()
    unknown = SessionLease(margin=0.1, clock=clock)
    unknown.answered(unknown.sending(7), 7)
    assert unknown.deadline(7) == -math.inf
    assert lease(clock).deadline(7) == -math.inf


def test_lease_belongs_to_one_session() -> None:
    clock = Clock()
    session = lease(clock)
    session.answered(session.sending(7), 7)
    # An answer in another session says nothing of session 7, and session 8 has none yet.
    assert session.deadline(8) == -math.inf
    # A request sent in 7 but answered once 8 replaced it proves neither.
    sent_in_7 = session.sending(7)
    session.answered(sent_in_7, 8)
    assert session.deadline(8) == -math.inf
    # Losing the session voids the lease at once.
    session.lost()
    assert session.deadline(7) == -math.inf
    session.answered(session.sending(8), 8)
    assert session.deadline(8) == 109.0


def test_no_session_no_lease() -> None:
    clock = Clock()
    session = lease(clock)
    session.answered(session.sending(None), None)
    assert session.deadline(None) == -math.inf
