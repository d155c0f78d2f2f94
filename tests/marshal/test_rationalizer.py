"""The rationalizer on hand-written logs: every rule, one log each."""

from __future__ import annotations

from herdless.marshal.messages import NO_OFFSET, Kind, Message
from herdless.marshal.rationalizer import ClaimKey, Entry, Freshness, rationalize
from tests.marshal.logs import GROUP, PARTITIONS, LogBuilder

KEY = ClaimKey(GROUP, "t", 0)


def state_of(log: LogBuilder):
    return rationalize(PARTITIONS, log.entries)


def test_first_claim_takes_an_unclaimed_partition() -> None:
    log = LogBuilder()
    won = log.claim("a", 0, 1000)
    state = state_of(log)
    claim = state.claims[KEY]
    assert (claim.owner, claim.claim_position, claim.last_offset) == ("a", won.offset, NO_OFFSET)
    assert state.freshness(KEY) is Freshness.FRESH


def test_earliest_claim_in_log_order_wins_a_race() -> None:
    log = LogBuilder()
    log.claim("b", 0, 1000)
    log.claim("a", 0, 1000)
    log.claim("c", 0, 1001)
    assert state_of(log).owner(KEY) == "b"


def test_freshness_is_judged_by_the_log_clock() -> None:
    log = LogBuilder()
    log.claim("a", 0, 1000)
    # Another key on the same coordination partition moves its clock on.
    other = next(p for p in range(1, 100) if _same_partition(p))
    log.claim("z", other, 1999)
    assert state_of(log).freshness(KEY) is Freshness.FRESH
    log.claim("z", other, 2000)
    assert state_of(log).freshness(KEY) is Freshness.UNKNOWN
    log.claim("z", other, 3000)
    assert state_of(log).freshness(KEY) is Freshness.UNKNOWN
    log.claim("z", other, 3001)
    assert state_of(log).freshness(KEY) is Freshness.STALE


def test_a_reader_judges_freshness_at_the_moment_it_reads() -> None:
    """Nobody writes after a's claim, so the log's clock stays at it; a reader that
    gives its clock sees the claim age, but never younger than the log says."""
    log = LogBuilder()
    log.claim("a", 0, 1000)
    log.present("a", 1000)
    state = state_of(log)
    assert state.freshness(KEY) is Freshness.FRESH
    assert state.freshness(KEY, reading_at_ms=1999) is Freshness.FRESH
    assert state.freshness(KEY, reading_at_ms=2500) is Freshness.UNKNOWN
    assert state.freshness(KEY, reading_at_ms=3001) is Freshness.STALE
    assert state.live_members(GROUP) == ["a"]
    assert state.live_members(GROUP, reading_at_ms=3001) == []
    # A reader's clock behind the log's changes nothing.
    log.heartbeat("a", 0, 5, 4000)
    assert state_of(log).freshness(KEY, reading_at_ms=0) is Freshness.FRESH


def _same_partition(p: int) -> bool:
    from herdless.marshal.placement import coordinating_partition

    return coordinating_partition("t", p, PARTITIONS) == coordinating_partition("t", 0, PARTITIONS)


def test_a_claim_on_a_fresh_or_unknown_owner_loses() -> None:
    log = LogBuilder()
    log.claim("a", 0, 1000)
    log.claim("b", 0, 1500)  # fresh
    log.claim("b", 0, 2900)  # unknown: still not claimable
    assert state_of(log).owner(KEY) == "a"


def test_a_claim_on_a_stale_owner_wins_and_advances_the_clock_itself() -> None:
    log = LogBuilder()
    log.claim("a", 0, 1000)
    log.heartbeat("a", 0, 41, 1200)
    log.claim("b", 0, 3201)  # the claim's own timestamp makes a stale
    state = state_of(log)
    claim = state.claims[KEY]
    assert (claim.owner, claim.last_offset) == ("b", 41)
    assert claim.resume_after(at_most_once=False) == 41


def test_heartbeats_count_only_from_the_owner() -> None:
    log = LogBuilder()
    log.claim("a", 0, 1000)
    log.heartbeat("b", 0, 99, 2500)  # Go Marshal let this take the partition
    log.claim("c", 0, 3001)
    state = state_of(log)
    assert state.owner(KEY) == "c"
    assert state.claims[KEY].last_offset == NO_OFFSET


def test_owner_heartbeats_keep_the_claim_and_carry_the_offset() -> None:
    log = LogBuilder()
    log.claim("a", 0, 1000)
    for at, offset in ((1900, 10), (2800, 20), (3700, 30)):
        log.heartbeat("a", 0, offset, at)
    log.claim("b", 0, 4000)
    state = state_of(log)
    assert state.owner(KEY) == "a"
    assert state.claims[KEY].last_offset == 30


def test_release_only_by_the_owner_and_keeps_the_offset() -> None:
    log = LogBuilder()
    log.claim("a", 0, 1000)
    log.release("b", 0, 5, 1100)
    assert state_of(log).owner(KEY) == "a"
    log.release("a", 0, 17, 1200)
    state = state_of(log)
    assert state.owner(KEY) is None
    assert state.freshness(KEY) is None
    log.claim("b", 0, 1300)  # released: no need to wait for staleness
    state = state_of(log)
    assert state.owner(KEY) == "b"
    assert state.claims[KEY].resume_after(at_most_once=False) == 17


def test_claiming_messages_counts_only_from_the_owner() -> None:
    log = LogBuilder()
    log.claim("a", 0, 1000)
    mine = log.claim_messages("a", 0, 50, 1100)
    log.claim_messages("b", 0, 90, 1200)
    claim = state_of(log).claims[KEY]
    assert (claim.claimed_through, claim.messages_position) == (50, mine.offset)


def test_takeover_at_most_once_starts_after_the_highest_claimed_batch() -> None:
    log = LogBuilder()
    log.claim("a", 0, 1000)
    log.claim_messages("a", 0, 50, 1100)
    log.heartbeat("a", 0, 50, 1110)
    log.claim_messages("a", 0, 80, 1200)  # claimed, then a died mid-batch
    log.claim("b", 0, 3300)
    log.claim_messages("a", 0, 120, 3400)  # too late: b owns it
    claim = state_of(log).claims[KEY]
    assert claim.owner == "b"
    assert claim.resume_after(at_most_once=True) == 80
    assert claim.resume_after(at_most_once=False) == 50


def test_an_owner_renews_its_own_claim() -> None:
    log = LogBuilder()
    first = log.claim("a", 0, 1000)
    log.heartbeat("a", 0, 7, 1100)
    again = log.claim("a", 0, 1500)
    claim = state_of(log).claims[KEY]
    assert (claim.owner, claim.last_offset) == ("a", 7)
    assert claim.claim_position == again.offset != first.offset


def test_groups_do_not_share_claims() -> None:
    log = LogBuilder()
    log.claim("a", 0, 1000)
    log.add(Message(Kind.CLAIMING_PARTITION, "b", "other", "t", 0, interval_ms=1000), 1001)
    state = state_of(log)
    assert state.owner(KEY) == "a"
    assert state.owner(ClaimKey("other", "t", 0)) == "b"


def test_misplaced_and_undecodable_records_are_skipped() -> None:
    log = LogBuilder()
    log.claim("a", 0, 1000)
    right = log.entries[0].partition
    wrong = (right + 1) % PARTITIONS
    log.entries.append(Entry(wrong, 0, 1001, log.entries[0].value.replace(b"a", b"b", 1)))
    log.entries.append(Entry(right, 1, 1002, b"not a marshal message"))
    state = state_of(log)
    assert state.owner(KEY) == "a"
    assert state.positions[right] == 2
    assert state.now(right) == 1002


def test_a_record_read_twice_counts_once() -> None:
    log = LogBuilder()
    log.claim("a", 0, 1000)
    log.release("a", 0, 3, 1100)
    log.claim("b", 0, 1200)
    replayed = rationalize(PARTITIONS, [*log.entries, log.entries[0]])
    assert replayed == state_of(log)


def test_the_clock_never_runs_backwards() -> None:
    log = LogBuilder()
    log.claim("a", 0, 5000)
    log.heartbeat("a", 0, 1, 4000)  # the broker's clock stepped back
    state = state_of(log)
    assert state.now(log.entries[0].partition) == 5000
    assert state.claims[KEY].heartbeat_at_ms == 5000


def test_members_are_live_until_stale_or_gone() -> None:
    log = LogBuilder()
    log.present("a", 1000)
    log.present("b", 1000)
    log.present("c", 1000)
    log.present("c", 1500, interval=0)  # c said goodbye
    assert state_of(log).live_members(GROUP) == ["a", "b"]
    log.present("b", 3001)
    assert state_of(log).live_members(GROUP) == ["b"]
