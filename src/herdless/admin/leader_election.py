"""ElectLeaders (KIP-460) as `herdless cluster elect-leaders` asks it: preferred or
unclean elections of given partitions, or of all, and each partition's outcome in
words, with the leader it has afterwards."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdless.admin.client import error_text, from_any_broker
from herdless.admin.errors import AdminError

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

ELECTION_TYPES = ("preferred", "unclean")
# How long the controller may take to elect, as kafka-leader-election.sh's admin client.
TIMEOUT_MS = 30_000
_ELECTION_NOT_NEEDED = 84


def elect_leaders(
    admin: KafkaAdminClient, election_type: str, partitions: list[tuple[str, int]] | None
) -> list[dict[str, Any]]:
    """One row per partition the controller answered for (over all partitions, only
    those elected or failed, as Kafka answers): topic, partition, outcome (`elected`,
    `not needed` or `failed`), error (the reason in words, or None), and leader (its
    leader now, -1 for none). AdminError for a refusal of the whole request."""
    response = _ask_controller(admin, election_type, partitions)
    top_error = getattr(response, "error_code", 0)
    if top_error:
        raise AdminError(f"cannot elect leaders: {error_text(top_error)}")
    rows = []
    for result in response.replica_election_results:
        for p in result.partition_result:
            code = p.error_code
            outcome = "elected" if code == 0 else "failed"
            if code == _ELECTION_NOT_NEEDED:
                outcome = "not needed"
            rows.append(
                {
                    "topic": result.topic,
                    "partition": p.partition_id,
                    "outcome": outcome,
                    "error": None if outcome != "failed" else error_text(code, p.error_message),
                }
            )
    rows.sort(key=lambda r: (r["topic"], r["partition"]))
    leaders = _leaders(admin, sorted({r["topic"] for r in rows}))
    for row in rows:
        row["leader"] = leaders.get((row["topic"], row["partition"]), -1)
    return rows


def _ask_controller(
    admin: KafkaAdminClient, election_type: str, partitions: list[tuple[str, int]] | None
) -> Any:
    """ElectLeaders at the controller, asked again of a new one once on NOT_CONTROLLER.

    kafka-python's elect_leaders names every partition when asked for all of them; Kafka's
    tool sends none (null), and the controller then answers only for the partitions it
    elected or failed to. This one private call sends the request as Kafka's tool does.
    """
    from kafka import errors
    from kafka.protocol.admin import ElectionType, ElectLeadersRequest

    wanted = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        wanted = [
            ElectLeadersRequest.TopicPartitions(topic=t, partitions=p) for t, p in by_topic.items()
        ]
    request = ElectLeadersRequest(
        election_type=ElectionType[election_type.upper()],
        topic_partitions=wanted,
        timeout_ms=TIMEOUT_MS,
    )

    def response_errors(response: Any) -> Any:
        for result in response.replica_election_results:
            for partition in result.partition_result:
                yield errors.for_code(partition.error_code)

    return admin._manager.run(admin._send_request_to_controller, request, response_errors, False)


def _leaders(admin: KafkaAdminClient, topics: list[str]) -> dict[tuple[str, int], int]:
    if not topics:
        return {}
    described = from_any_broker(lambda: admin.describe_topics(topics))
    return {
        (t["name"], p["partition_index"]): p["leader_id"]
        for t in described
        if t["error_code"] == 0
        for p in t["partitions"]
    }
