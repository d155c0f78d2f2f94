"""What `herdless cluster describe` and the console show of a cluster: its brokers,
racks and controller, how many groups each broker coordinates, and which
partitions are under-replicated or offline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdless.admin.client import error_text, from_any_broker
from herdless.admin.group_state import list_group_ids
from herdless.coordinator.internal_topics import OFFSETS_TOPIC

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

# A group's coordinator is the leader of the partition of this topic its id hashes to.


def cluster_state(
    admin: KafkaAdminClient, topics: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """What `cluster describe` shows, as its JSON document (keys in docs/cli.md);
    `topics`: every topic as described already, if the caller has them."""
    cluster = from_any_broker(admin.describe_cluster)
    if topics is None:
        topics = from_any_broker(admin.describe_topics)
    brokers = sorted(cluster.get("brokers", []), key=lambda b: b["broker_id"])
    groups = {b["broker_id"]: _coordinated_groups(admin, b["broker_id"]) for b in brokers}
    controller = cluster.get("controller_id", -1)
    live = {b["broker_id"] for b in brokers}
    leads = dict.fromkeys(live, 0)
    offsets_leads = dict.fromkeys(live, 0)
    hosts = dict.fromkeys(live, 0)
    lagging = dict.fromkeys(live, 0)
    problems = []
    total = 0
    for topic in sorted(topics, key=lambda t: t["name"]):
        for p in sorted(topic["partitions"], key=lambda p: p["partition_index"]):
            total += 1
            replicas, isr = p["replica_nodes"], p["isr_nodes"]
            if p["leader_id"] in leads:
                leads[p["leader_id"]] += 1
                if topic["name"] == OFFSETS_TOPIC:
                    offsets_leads[p["leader_id"]] += 1
            for replica in replicas:
                if replica in hosts:
                    hosts[replica] += 1
                    if replica not in isr:
                        lagging[replica] += 1
            state = (
                "offline"
                if p["leader_id"] < 0
                else "under-replicated"
                if len(isr) < len(replicas)
                else None
            )
            if state is not None:
                problems.append(
                    {
                        "topic": topic["name"],
                        "partition": p["partition_index"],
                        "state": state,
                        "leader": p["leader_id"],
                        "replicas": replicas,
                        "isr": isr,
                        "offline_replicas": p.get("offline_replicas") or [],
                    }
                )
    broker_rows = [
        {
            "broker": b["broker_id"],
            "host": b["host"],
            "port": b["port"],
            "rack": b.get("rack"),
            "controller": b["broker_id"] == controller,
            "leader_of": leads[b["broker_id"]],
            "replicas": hosts[b["broker_id"]],
            "out_of_isr": lagging[b["broker_id"]],
            "offsets_leader_of": offsets_leads[b["broker_id"]],
            "groups": groups[b["broker_id"]][0],
            "groups_error": groups[b["broker_id"]][1],
        }
        for b in brokers
    ]
    return {
        "cluster_id": cluster.get("cluster_id"),
        "controller": controller,
        "brokers": broker_rows,
        "partitions": total,
        "under_replicated": sum(1 for p in problems if p["state"] == "under-replicated"),
        "offline": sum(1 for p in problems if p["state"] == "offline"),
        "unhealthy_partitions": problems,
    }


def _coordinated_groups(admin: KafkaAdminClient, broker_id: int) -> tuple[int | None, str | None]:
    """How many groups the broker coordinates, or why it cannot say (its ListGroups failed).

    A broker that cannot be reached is one row of the view, not the command's failure.
    """
    from kafka.errors import BrokerResponseError, CoordinatorLoadInProgressError, KafkaError

    try:
        return len(list_group_ids(admin, broker_ids=[broker_id])), None
    except CoordinatorLoadInProgressError:
        # It coordinates some groups but is still reading them from __consumer_offsets.
        return None, "loading"
    except BrokerResponseError as exc:
        return None, error_text(exc)
    except KafkaError:
        return None, "unreachable"
