"""The persisted part of a shard's state, for comparing a live shard with its replay."""

from __future__ import annotations

from typing import Any

from herdless.coordinator import CoordinatorShard, GroupState


def quiescent(shard: CoordinatorShard) -> bool:
    """No rebalance in flight: what the log holds is all there is to each group. (A
    consumer group is all in its log at any time.)"""
    return all(g.state in (GroupState.STABLE, GroupState.EMPTY) for g in shard.groups.values())


def snapshot(shard: CoordinatorShard) -> dict[str, Any]:
    groups = {}
    for group_id, g in shard.groups.items():
        groups[group_id] = (
            g.state,
            g.generation,
            g.protocol_type,
            g.protocol_name,
            g.leader_id,
            g.current_state_timestamp,
            g.subscribed_topics,
            tuple(
                (
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(g.protocol_name) if g.protocol_name is not None else None,
                    m.assignment,
                )
                for m in g.members.values()
            ),
        )
    offsets = {
        (group_id, topic, partition): value
        for group_id in shard.offsets.group_ids()
        for topic, partition, value in shard.offsets.entries(group_id)
    }
    consumer_groups = {
        group_id: (
            g.group_epoch,
            g.target_assignment_epoch,
            g.members,
            g.target_assignment,
            g.subscription_metadata,
            g.resolved_regexes,
            g.static_members,
            g.owned_partitions(),
        )
        for group_id, g in shard.consumer.groups.items()
    }
    return {"groups": groups, "offsets": offsets, "consumer_groups": consumer_groups}
