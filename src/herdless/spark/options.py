"""Options of the `herdless` format, checked before anything talks to a broker.

Names follow Spark's Kafka source where the idea is the same
(kafka.bootstrap.servers, subscribe, subscribePattern, startingOffsets,
endingOffsets, maxOffsetsPerTrigger, failOnDataLoss, includeHeaders, topic,
kafka.*). Spark hands Python data sources their options with lower-cased keys,
so every lookup here is lower-case.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from herdless.spark.errors import HerdlessSparkError
from herdless.spark.offsets import TopicPartition, parse_offsets_json

Mode = Literal["stream", "batch", "any", "write"]

# Client properties this source owns: letting users set them would break the
# meaning of the options above (the same list Spark's Kafka source refuses).
_OWNED_CLIENT_PROPERTIES = {
    "auto.offset.reset": "use startingOffsets",
    "enable.auto.commit": "the source commits each batch's end offsets itself",
    "enable.auto.offset.store": "the source commits each batch's end offsets itself",
    "key.deserializer": "keys are always returned as bytes",
    "value.deserializer": "values are always returned as bytes",
    "key.serializer": "keys are written as the bytes (or UTF-8 strings) of the key column",
    "value.serializer": "values are written as the bytes (or UTF-8 strings) of the value column",
    "enable.idempotence": "the writer always uses an idempotent producer",
}

_COMMON = {"kafka.bootstrap.servers", "connecttimeoutms"}
_READ = _COMMON | {
    "subscribe",
    "subscribepattern",
    "group.id",
    "kafka.group.id",
    "startingoffsets",
    "failondataloss",
    "includeheaders",
    "kafkaconsumer.polltimeoutms",
}
_ALLOWED: dict[Mode, set[str]] = {
    "stream": _READ | {"maxoffsetspertrigger", "groupjointimeoutms"},
    "batch": _READ | {"endingoffsets"},
    # Spark passes a streaming query's checkpointLocation on to its sink.
    "write": _COMMON | {"topic", "checkpointlocation"},
}
_ALLOWED["any"] = _ALLOWED["stream"] | _ALLOWED["batch"]
# Options that exist, but not for this kind of use: name the right one.
_WRONG_MODE = {
    "endingoffsets": "endingOffsets applies to batch reads (spark.read) only",
    "maxoffsetspertrigger": "maxOffsetsPerTrigger applies to streaming reads only",
    "groupjointimeoutms": "groupJoinTimeoutMs applies to streaming reads only",
    "topic": "topic names the topic to write to; readers use subscribe or subscribePattern",
    "assign": "assign is not supported: this source reads through a consumer group; use subscribe",
}

# Kafka's rule for topic names.
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

StartingOffsets = Literal["earliest", "latest", "committed"] | dict[TopicPartition, int]
EndingOffsets = Literal["latest"] | dict[TopicPartition, int]


@dataclass(frozen=True)
class ClientOptions:
    bootstrap: str
    client: dict[str, str]  # kafka.* options, prefix stripped
    connect_timeout_s: float

    def consumer_config(self, group_id: str) -> dict[str, object]:
        return {
            **self.client,
            "bootstrap.servers": self.bootstrap,
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }

    def producer_config(self) -> dict[str, object]:
        return {**self.client, "bootstrap.servers": self.bootstrap, "enable.idempotence": True}


@dataclass(frozen=True)
class ReadOptions:
    connection: ClientOptions
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    group_id: str | None = None
    starting: StartingOffsets = "latest"
    ending: EndingOffsets = "latest"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = True
    poll_timeout_s: float = 120.0
    group_join_timeout_s: float = 60.0
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def subscription(self) -> list[str]:
        """What librdkafka's subscribe() takes: topic names, or a regex starting with ^."""
        if self.pattern is not None:
            return [self.pattern if self.pattern.startswith("^") else "^" + self.pattern]
        return list(self.topics)

    def describe_subscription(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern {self.pattern!r}"
        return "subscribe " + ",".join(self.topics)


@dataclass(frozen=True)
class WriteOptions:
    connection: ClientOptions
    topic: str | None


def _check_keys(options: Mapping[str, str], mode: Mode) -> None:
    for key in options:
        if key.startswith("kafka."):
            prop = key[len("kafka.") :]
            if prop in _OWNED_CLIENT_PROPERTIES:
                raise HerdlessSparkError(
                    f"option {key} is not supported: {_OWNED_CLIENT_PROPERTIES[prop]}"
                )
            continue
        if key in _ALLOWED[mode]:
            continue
        if key in _WRONG_MODE:
            raise HerdlessSparkError(f"option {key} is not valid here: {_WRONG_MODE[key]}")
        known = sorted(k for k in _ALLOWED[mode] if not k.startswith("kafka."))
        raise HerdlessSparkError(
            f"unknown option {key!r} for the herdless format; known options: "
            f"{', '.join(known)}, kafka.bootstrap.servers and kafka.<client property>"
        )


def _positive_number(options: Mapping[str, str], key: str, default: float) -> float:
    raw = options.get(key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise HerdlessSparkError(f"option {key} must be a number, got {raw!r}") from None
    if value <= 0:
        raise HerdlessSparkError(f"option {key} must be positive, got {raw!r}")
    return value


def _boolean(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise HerdlessSparkError(f"option {key} must be true or false, got {raw!r}")


def _connection(options: Mapping[str, str]) -> ClientOptions:
    bootstrap = (options.get("kafka.bootstrap.servers") or "").strip()
    if not bootstrap:
        raise HerdlessSparkError(
            "option kafka.bootstrap.servers is required, e.g. "
            '.option("kafka.bootstrap.servers", "127.0.0.1:9092")'
        )
    client = {
        key[len("kafka.") :]: value
        for key, value in options.items()
        if key.startswith("kafka.") and key not in ("kafka.bootstrap.servers", "kafka.group.id")
    }
    timeout_ms = _positive_number(options, "connecttimeoutms", 10_000)
    return ClientOptions(bootstrap, client, timeout_ms / 1000)


def _group_id(options: Mapping[str, str]) -> str | None:
    plain, prefixed = options.get("group.id"), options.get("kafka.group.id")
    if plain is not None and prefixed is not None and plain != prefixed:
        raise HerdlessSparkError(
            f"options group.id ({plain!r}) and kafka.group.id ({prefixed!r}) conflict; set one"
        )
    group = plain if plain is not None else prefixed
    if group is not None and not group.strip():
        raise HerdlessSparkError("option group.id must not be empty")
    return group


def _topics(options: Mapping[str, str]) -> tuple[tuple[str, ...], str | None]:
    subscribe, pattern = options.get("subscribe"), options.get("subscribepattern")
    if (subscribe is None) == (pattern is None):
        raise HerdlessSparkError(
            "set exactly one of the options subscribe (comma-separated topics) "
            "and subscribePattern (a regular expression)"
        )
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise HerdlessSparkError(
                f"subscribePattern {pattern!r} is not a regular expression: {exc}"
            ) from None
        return (), pattern
    assert subscribe is not None
    topics = tuple(t.strip() for t in subscribe.split(",") if t.strip())
    if not topics:
        raise HerdlessSparkError("option subscribe names no topic")
    for topic in topics:
        if not _TOPIC_NAME.match(topic):
            raise HerdlessSparkError(f"subscribe: {topic!r} is not a valid topic name")
    return topics, None


def _starting(options: Mapping[str, str], default: str, group_id: str | None) -> StartingOffsets:
    raw = options.get("startingoffsets", default).strip()
    if raw.lower() in ("earliest", "latest", "committed"):
        if raw.lower() == "committed" and group_id is None:
            raise HerdlessSparkError("startingOffsets committed needs the option group.id")
        return raw.lower()  # type: ignore[return-value]
    return parse_offsets_json(raw, "startingOffsets")


def _ending(options: Mapping[str, str]) -> EndingOffsets:
    raw = options.get("endingoffsets", "latest").strip()
    if raw.lower() == "latest":
        return "latest"
    if raw.lower() in ("earliest", "committed"):
        raise HerdlessSparkError(f"endingOffsets {raw!r} is not allowed: use latest or JSON")
    return parse_offsets_json(raw, "endingOffsets", allow_earliest=False)


def read_options(
    options: Mapping[str, str], mode: Literal["stream", "batch", "any"]
) -> ReadOptions:
    _check_keys(options, mode)
    connection = _connection(options)
    topics, pattern = _topics(options)
    group_id = _group_id(options)
    if mode == "stream" and group_id is None:
        raise HerdlessSparkError(
            "option group.id is required for streaming reads: the query joins that "
            "consumer group and commits each batch's offsets to it"
        )
    max_per_trigger = None
    if "maxoffsetspertrigger" in options:
        max_per_trigger = int(_positive_number(options, "maxoffsetspertrigger", 1))
    starting = _starting(options, "latest" if mode == "stream" else "earliest", group_id)
    ending = _ending(options) if mode != "stream" else "latest"
    if isinstance(starting, dict) or isinstance(ending, dict):
        _check_json_topics(starting, ending, topics, pattern)
    return ReadOptions(
        connection=connection,
        topics=topics,
        pattern=pattern,
        group_id=group_id,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=max_per_trigger,
        fail_on_data_loss=_boolean(options, "failondataloss", True),
        include_headers=_boolean(options, "includeheaders", True),
        poll_timeout_s=_positive_number(options, "kafkaconsumer.polltimeoutms", 120_000) / 1000,
        group_join_timeout_s=_positive_number(options, "groupjointimeoutms", 60_000) / 1000,
    )


def _check_json_topics(
    starting: StartingOffsets, ending: EndingOffsets, topics: tuple[str, ...], pattern: str | None
) -> None:
    for name, offsets in (("startingOffsets", starting), ("endingOffsets", ending)):
        if not isinstance(offsets, dict):
            continue
        for topic, _ in offsets:
            subscribed = re.fullmatch(pattern.lstrip("^"), topic) if pattern else topic in topics
            if not subscribed:
                raise HerdlessSparkError(f"{name} names topic {topic!r}, which is not subscribed")


def write_options(options: Mapping[str, str]) -> WriteOptions:
    _check_keys(options, "write")
    topic = options.get("topic")
    if topic is not None and not _TOPIC_NAME.match(topic):
        raise HerdlessSparkError(f"option topic: {topic!r} is not a valid topic name")
    return WriteOptions(_connection(options), topic)
