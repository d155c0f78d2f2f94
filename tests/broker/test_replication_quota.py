"""Replication throttles as Kafka's ReplicationQuotaManager keeps them, on a fake clock."""

from __future__ import annotations

from herdless.broker.replication.quota import UNLIMITED, ReplicationQuota, throttled_partitions


def test_the_throttled_replicas_config_names_partitions_per_broker() -> None:
    assert throttled_partitions("0:1,1:2,2:1", 1) == {0, 2}
    assert throttled_partitions("0:1,1:2", 3) == frozenset()
    assert throttled_partitions("*", 3) is None


def test_only_listed_partitions_are_throttled_and_only_with_a_rate() -> None:
    now = [0]
    quota = ReplicationQuota(1, 1000, lambda: now[0], samples=2, window_ms=1000)
    assert quota.is_throttled("0:1", 0)
    assert not quota.is_throttled("0:1", 1)
    assert not quota.is_throttled("", 0)
    assert quota.is_throttled("*", 7)
    unlimited = ReplicationQuota(1, UNLIMITED, lambda: now[0])
    assert not unlimited.is_throttled("*", 0)


def test_the_quota_is_exceeded_past_its_rate_and_recovers_as_time_passes() -> None:
    now = [0]
    quota = ReplicationQuota(1, 1000, lambda: now[0], samples=2, window_ms=1000)
    quota.record(900)
    assert not quota.exceeded()
    quota.record(600)
    assert quota.exceeded()  # 1500 bytes over the first second
    now[0] = 2500
    assert not quota.exceeded()
    # A new rate applies at once, to what was measured.
    quota.record(1500)
    assert quota.exceeded()
    quota.set_bound(10_000)
    assert not quota.exceeded()
