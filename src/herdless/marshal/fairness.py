"""What a consumer should claim or release next: a pure decision on a world state.

KCL-style balance. With P partitions in the group's topics and N live members
(those whose Present is not stale), nobody needs more than ceil(P/N) and
everybody is owed floor(P/N). Each cycle a consumer:

- releases one partition if some live member is waiting (holds fewer than
  floor(P/N)), it holds more than floor(P/N), and it is the most loaded live
  member (ties broken by client id, so exactly one member moves per cycle
  and the group does not release in a stampede);
- claims one free or stale partition if it holds fewer than ceil(P/N), unless
  somebody else is waiting and it already has its floor: the free partition is
  left for the one waiting.

The GREEDY strategy ignores all of this and claims every free partition, as
the Go library did by option.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from herdless.marshal.rationalizer import ClaimKey, Freshness, WorldState


class ClaimStrategy(enum.Enum):
    FAIR = "fair"
    GREEDY = "greedy"


@dataclass(frozen=True, slots=True)
class Plan:
    release: ClaimKey | None
    claimable: list[ClaimKey]  # candidates to claim, best first; claim one per cycle


def holdings(state: WorldState, group_id: str) -> dict[str, list[ClaimKey]]:
    """Who holds what, counting only claims that have not gone stale."""
    held: dict[str, list[ClaimKey]] = {}
    for key, claim in state.group_claims(group_id).items():
        if claim.owner is not None and state.freshness(key) is not Freshness.STALE:
            held.setdefault(claim.owner, []).append(key)
    return held


def free(state: WorldState, key: ClaimKey, stale_hint: bool = False) -> bool:
    """Whether a claim on key can win now: unowned, or its owner is stale.

    stale_hint says the caller's wall clock already judges the owner stale
    although the log's clock has not moved on far enough; the claim itself
    then advances the log's clock and the log decides.
    """
    claim = state.claims.get(key)
    if claim is None or claim.owner is None:
        return True
    return stale_hint or state.freshness(key) is Freshness.STALE


def plan(
    state: WorldState,
    group_id: str,
    client_id: str,
    partitions: Sequence[ClaimKey],
    strategy: ClaimStrategy,
    stale_hints: frozenset[ClaimKey] = frozenset(),
) -> Plan:
    mine = [k for k in partitions if state.owner(k) == client_id]
    candidates = [
        k for k in partitions if state.owner(k) != client_id and free(state, k, k in stale_hints)
    ]
    if strategy is ClaimStrategy.GREEDY:
        return Plan(None, candidates)
    held = holdings(state, group_id)
    live = set(state.live_members(group_id)) | {client_id}
    count = {member: len(held.get(member, ())) for member in live}
    count[client_id] = len(mine)
    ceiling = math.ceil(len(partitions) / len(live))
    floor = len(partitions) // len(live)
    waiting = [m for m in live if m != client_id and count[m] < floor]
    release = None
    if waiting and len(mine) > floor:
        busiest = max(live, key=lambda m: (count[m], m))
        if busiest == client_id:
            release = max(mine, key=lambda k: (k.topic, k.partition))
    if release is not None or len(mine) >= ceiling or (waiting and len(mine) >= floor):
        return Plan(release, [])
    return Plan(None, candidates)
