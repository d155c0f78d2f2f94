"""Options of the `herdless` format: those of Spark's Kafka source and sink, checked before
anything talks to a broker.

The names, defaults and refusals are Spark's (KafkaSourceProvider), so a job
written for format("kafka") runs with only the format name changed;
docs/spark.md lists every option and where herdless differs. Unlike Spark, an
option no Kafka source knows is an error rather than silently ignored. Spark
hands Python data sources their options with lower-cased keys, and read_options
lower-cases them too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from herdless.protocol.config_values import InvalidConfigValue, parse_boolean
from herdless.spark.client_config import (
    check_read_settings,
    check_write_settings,
    librdkafka_settings,
)
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.offsets import (
    EARLIEST,
    LATEST,
    TopicPartition,
    decode_json,
    parse_offsets_json,
    parse_timestamps_json,
    sorted_partitions,
)

Mode = Literal["stream", "batch", "any", "write"]

_COMMON = {"kafka.bootstrap.servers", "connecttimeoutms"}
_READ = _COMMON | {
    "subscribe",
    "subscribepattern",
    "assign",
    "group.id",
    "kafka.group.id",
    "groupidprefix",
    "startingoffsets",
    "startingoffsetsbytimestamp",
    "startingtimestamp",
    "startingoffsetsbytimestampstrategy",
    "failondataloss",
    "includeheaders",
    "minpartitions",
    "maxrecordsperpartition",
    "kafkaconsumer.polltimeoutms",
    "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
    # Spark accepts these in batch reads too, and ignores them there.
    "maxoffsetspertrigger",
    "minoffsetspertrigger",
    "maxtriggerdelay",
}
_ENDING = {"endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"}
_ALLOWED: dict[Mode, set[str]] = {
    "stream": _READ | {"groupjointimeoutms"},
    "batch": _READ | _ENDING,
    # Spark passes a streaming query's checkpointLocation on to its sink.
    "write": _COMMON | {"topic", "checkpointlocation", "transactionalidprefix"},
}
_ALLOWED["any"] = _ALLOWED["stream"] | _ALLOWED["batch"]
# Options that exist, but not for this kind of use: name the right one.
_WRONG_MODE = {
    **dict.fromkeys(_ENDING, "ending offsets are not valid in streaming queries (spark.read only)"),
    "groupjointimeoutms": "groupJoinTimeoutMs applies to streaming reads only",
    "topic": "topic names the topic to write to; readers use subscribe, subscribePattern or assign",
    "transactionalidprefix": "transactionalIdPrefix makes streaming writes exactly-once",
}

# Kafka's rule for topic names.
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
# Spark's time strings (Utils.timeStringAsMs): a number, then a unit; no unit means ms.
_DURATION = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")
_DURATION_MS: dict[str, float] = {
    "us": 0.001,
    "": 1,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}

DEFAULT_GROUP_ID_PREFIX = "spark-kafka-source"
DEFAULT_MAX_TRIGGER_DELAY_S = 15 * 60.0

Named = Literal["earliest", "latest", "committed"]


@dataclass(frozen=True)
class ClientOptions:
    bootstrap: str
    client: dict[str, str]  # kafka.* options, prefix stripped, as the user gave them
    connect_timeout_s: float

    def consumer_config(self, group_id: str) -> dict[str, object]:
        return {
            **librdkafka_settings(self.client),
            "bootstrap.servers": self.bootstrap,
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }

    def producer_config(self) -> dict[str, object]:
        return {
            # Java's partitioner: keyed records land where Spark's Kafka sink puts them.
            "partitioner": "murmur2_random",
            **librdkafka_settings(self.client),
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": True,
        }


@dataclass(frozen=True)
class Subscription:
    """What a reader reads: named topics, topics matching a pattern, or assigned partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    @property
    def assigns(self) -> bool:
        return bool(self.assigned)

    def covers(self, tp: TopicPartition) -> bool:
        if self.assigned:
            return tp in self.assigned
        if self.pattern is not None:
            return re.fullmatch(self.pattern, tp[0]) is not None
        return tp[0] in self.topics

    def for_librdkafka(self) -> list[str]:
        """What librdkafka's subscribe() takes: topic names, or a regex starting with ^."""
        if self.pattern is not None:
            return [self.pattern if self.pattern.startswith("^") else "^" + self.pattern]
        return list(self.topics)

    def describe(self) -> str:
        if self.assigned:
            return "assign " + ",".join(f"{t}-{p}" for t, p in self.assigned)
        if self.pattern is not None:
            return f"subscribePattern {self.pattern!r}"
        return "subscribe " + ",".join(self.topics)


@dataclass(frozen=True)
class Bound:
    """Where reads start (or a batch read ends), per partition, as the options say.

    For each partition the first that applies wins, as in Spark: the one
    timestamp (startingTimestamp), the partition's timestamp
    (startingOffsetsByTimestamp), the partition's offset (startingOffsets
    JSON, -2 earliest, -1 latest), then `named`.
    """

    named: Named
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    # startingOffsetsByTimestampStrategy=latest: a timestamp past every record means latest.
    latest_when_no_match: bool = False

    def offset_or_named(self, tp: TopicPartition) -> int | Named:
        offset = self.offsets.get(tp)
        if offset is None:
            return self.named
        return "earliest" if offset == EARLIEST else "latest" if offset == LATEST else offset

    def timestamp_of(self, tp: TopicPartition) -> int | None:
        return self.timestamp if self.timestamp is not None else self.timestamps.get(tp)


@dataclass(frozen=True)
class ReadOptions:
    connection: ClientOptions
    subscription: Subscription
    group_id: str | None = None
    group_id_prefix: str = DEFAULT_GROUP_ID_PREFIX
    starting: Bound = Bound("latest")
    ending: Bound = Bound("latest")
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_s: float = DEFAULT_MAX_TRIGGER_DELAY_S
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_s: float = 120.0
    group_join_timeout_s: float = 60.0

    @property
    def joins_group(self) -> bool:
        """Streaming reads of subscribed topics with a group id are members of that group."""
        return self.group_id is not None and not self.subscription.assigns

    @property
    def lookup_group(self) -> str:
        """The group id of consumers that never join: Spark's generated prefix unless set."""
        return self.group_id or f"{self.group_id_prefix}-lookup"


@dataclass(frozen=True)
class WriteOptions:
    connection: ClientOptions
    topic: str | None
    # Set: a streaming write commits each task's part of a batch in one transaction,
    # exactly once (transactions.py); unset: idempotent, at-least-once.
    transactional_id_prefix: str | None = None

    @property
    def exactly_once(self) -> bool:
        return self.transactional_id_prefix is not None


def _check_keys(options: Mapping[str, str], mode: Mode) -> None:
    client = {k[len("kafka.") :]: v for k, v in options.items() if k.startswith("kafka.")}
    if mode == "write":
        check_write_settings(client)
    else:
        check_read_settings(client)
    for key in options:
        if key.startswith("kafka.") or key in _ALLOWED[mode]:
            continue
        if key in _WRONG_MODE:
            raise HerdlessSparkError(f"option {key} is not valid here: {_WRONG_MODE[key]}")
        known = sorted(k for k in _ALLOWED[mode] if not k.startswith("kafka."))
        raise HerdlessSparkError(
            f"unknown option {key!r} for the herdless format; known options: "
            f"{', '.join(known)}, kafka.bootstrap.servers and kafka.<client property>"
        )


def _number(options: Mapping[str, str], key: str, default: float) -> float:
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


def _count(options: Mapping[str, str], key: str) -> int | None:
    """A positive whole number, or None when the option is not set."""
    value = _whole(options, key, "a whole number")
    if value is not None and value <= 0:
        raise HerdlessSparkError(f"option {key} must be positive, got {options[key]!r}")
    return value


def _whole(options: Mapping[str, str], key: str, what: str) -> int | None:
    raw = options.get(key)
    if raw is None:
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise HerdlessSparkError(f"option {key} must be {what}, got {raw!r}") from None


def _boolean(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    try:
        return parse_boolean(key, raw)
    except InvalidConfigValue as exc:
        raise HerdlessSparkError(str(exc)) from None


def _duration_s(options: Mapping[str, str], key: str, default: float) -> float:
    raw = options.get(key)
    if raw is None:
        return default
    match = _DURATION.match(raw.lower())
    if match is None or match.group(2) not in _DURATION_MS:
        raise HerdlessSparkError(
            f"option {key} must be a time such as 30s, 5m or 500ms, got {raw!r}"
        )
    return int(match.group(1)) * _DURATION_MS[match.group(2)] / 1000


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
    timeout_ms = _number(options, "connecttimeoutms", 10_000)
    return ClientOptions(bootstrap, client, timeout_ms / 1000)


def _group_id(options: Mapping[str, str]) -> str | None:
    plain, prefixed = options.get("group.id"), options.get("kafka.group.id")
    if plain is not None and prefixed is not None and plain != prefixed:
        raise HerdlessSparkError(
            f"options group.id ({plain!r}) and kafka.group.id ({prefixed!r}) conflict; set one"
        )
    group = plain if plain is not None else prefixed
    if group is not None and not group.strip():
        raise HerdlessSparkError("option kafka.group.id must not be empty")
    return group


def _subscription(options: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in options]
    if len(given) != 1:
        which = " and ".join(given) if given else "none"
        raise HerdlessSparkError(
            "set exactly one of the options subscribe (comma-separated topics), "
            "subscribePattern (a regular expression) and assign (JSON such as "
            f'{{"topic": [0, 1]}}); set: {which}'
        )
    if "assign" in options:
        return Subscription(assigned=_assigned(options["assign"]))
    if "subscribepattern" in options:
        pattern = options["subscribepattern"].strip()
        if not pattern:
            raise HerdlessSparkError("option subscribePattern is empty")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise HerdlessSparkError(
                f"subscribePattern {pattern!r} is not a regular expression: {exc}"
            ) from None
        return Subscription(pattern=pattern)
    topics = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
    if not topics:
        raise HerdlessSparkError(
            f"option subscribe names no topic (it is {options['subscribe']!r})"
        )
    for topic in topics:
        _check_topic_name(topic, "subscribe")
    return Subscription(topics=topics)


def _check_topic_name(topic: str, option: str) -> None:
    if not _TOPIC_NAME.match(topic):
        raise HerdlessSparkError(f"{option}: {topic!r} is not a valid topic name")


def _assigned(raw: str) -> tuple[TopicPartition, ...]:
    """Spark's assign JSON: {"topicA": [0, 1], "topicB": [2]}."""
    if not raw.strip().startswith("{"):
        raise HerdlessSparkError(
            f'option assign must be JSON such as {{"topic": [0, 1]}}, got {raw!r}'
        )
    decoded = decode_json(raw, "option assign", "not valid JSON")
    partitions = []
    for topic, numbers in decoded.items():
        _check_topic_name(topic, "assign")
        if not isinstance(numbers, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers
        ):
            raise HerdlessSparkError(
                f"option assign: topic {topic!r} must map to a list of partition numbers, "
                f"got {numbers!r}"
            )
        partitions.extend((topic, n) for n in numbers)
    if not partitions:
        raise HerdlessSparkError(f"option assign names no partition (it is {raw!r})")
    return tuple(sorted_partitions(set(partitions)))


def _timestamp(options: Mapping[str, str], key: str) -> int | None:
    value = _whole(options, key, "one timestamp in milliseconds")
    if value is not None and value < 0:
        raise HerdlessSparkError(f"option {key} must not be negative, got {options[key]!r}")
    return value


def _starting(options: Mapping[str, str], mode: str, group_id: str | None) -> Bound:
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise HerdlessSparkError(
            "option startingOffsetsByTimestampStrategy must be error or latest, "
            f"got {options['startingoffsetsbytimestampstrategy']!r}"
        )
    raw = options.get("startingoffsets", "latest" if mode == "stream" else "earliest").strip()
    offsets: dict[TopicPartition, int] = {}
    named: Named = "earliest"
    if raw.lower() in ("earliest", "latest", "committed"):
        named = raw.lower()  # type: ignore[assignment]
    else:
        offsets = parse_offsets_json(raw, "startingOffsets")
    if named == "committed" and group_id is None:
        raise HerdlessSparkError("startingOffsets committed needs the option kafka.group.id")
    if mode == "batch" and (named == "latest" or LATEST in offsets.values()):
        raise HerdlessSparkError(
            "startingOffsets latest (or -1 in JSON) is not valid for batch reads: "
            "the read would be empty"
        )
    timestamps = {}
    if "startingoffsetsbytimestamp" in options:
        timestamps = parse_timestamps_json(
            options["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp"
        )
    return Bound(
        named=named,
        offsets=offsets,
        timestamps=timestamps,
        timestamp=_timestamp(options, "startingtimestamp"),
        latest_when_no_match=strategy == "latest",
    )


def _ending(options: Mapping[str, str]) -> Bound:
    raw = options.get("endingoffsets", "latest").strip()
    offsets: dict[TopicPartition, int] = {}
    if raw.lower() in ("earliest", "committed"):
        raise HerdlessSparkError(f"endingOffsets {raw!r} is not valid: use latest or JSON")
    if raw.lower() != "latest":
        offsets = parse_offsets_json(raw, "endingOffsets", allow_earliest=False)
    timestamps = {}
    if "endingoffsetsbytimestamp" in options:
        timestamps = parse_timestamps_json(
            options["endingoffsetsbytimestamp"], "endingOffsetsByTimestamp"
        )
    return Bound(
        named="latest",
        offsets=offsets,
        timestamps=timestamps,
        timestamp=_timestamp(options, "endingtimestamp"),
        # Spark: an ending timestamp past every record means the end of the log.
        latest_when_no_match=True,
    )


def _check_bounds(starting: Bound, ending: Bound, subscription: Subscription) -> None:
    """Named partitions are read; offsets or timestamps given at both ends agree (as Spark)."""
    for name, partitions in (
        ("startingOffsets", starting.offsets),
        ("startingOffsetsByTimestamp", starting.timestamps),
        ("endingOffsets", ending.offsets),
        ("endingOffsetsByTimestamp", ending.timestamps),
    ):
        for tp in partitions:
            if not subscription.covers(tp):
                raise HerdlessSparkError(
                    f"{name} names {tp[0]}-{tp[1]}, which this reader does not read "
                    f"({subscription.describe()})"
                )
    pairs = (
        ("startingOffsets", starting.offsets, "endingOffsets", ending.offsets),
        (
            "startingOffsetsByTimestamp",
            starting.timestamps,
            "endingOffsetsByTimestamp",
            ending.timestamps,
        ),
    )
    for first, begins, last, ends in pairs:
        if not begins or not ends:
            continue
        if set(begins) != set(ends):
            raise HerdlessSparkError(
                f"{first} and {last} must name the same partitions: "
                f"{_listed(begins)} against {_listed(ends)}"
            )
        for tp, begin in begins.items():
            if begin >= 0 and ends[tp] >= 0 and begin > ends[tp]:
                raise HerdlessSparkError(
                    f"{first} of {tp[0]}-{tp[1]} ({begin}) is past its {last} ({ends[tp]})"
                )


def _listed(partitions: Mapping[TopicPartition, int]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted_partitions(partitions))


def read_options(
    options: Mapping[str, str], mode: Literal["stream", "batch", "any"]
) -> ReadOptions:
    options = {key.lower(): value for key, value in options.items()}
    _check_keys(options, mode)
    connection = _connection(options)
    subscription = _subscription(options)
    group_id = _group_id(options)
    max_per_trigger = _count(options, "maxoffsetspertrigger")
    min_per_trigger = _count(options, "minoffsetspertrigger")
    if max_per_trigger and min_per_trigger and min_per_trigger > max_per_trigger:
        raise HerdlessSparkError(
            f"minOffsetsPerTrigger ({min_per_trigger}) is higher than "
            f"maxOffsetsPerTrigger ({max_per_trigger})"
        )
    starting = _starting(options, mode, group_id)
    ending = _ending(options) if mode != "stream" else Bound("latest")
    _check_bounds(starting, ending, subscription)
    return ReadOptions(
        connection=connection,
        subscription=subscription,
        group_id=group_id,
        group_id_prefix=options.get("groupidprefix", DEFAULT_GROUP_ID_PREFIX),
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_s=_duration_s(options, "maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY_S),
        min_partitions=_count(options, "minpartitions"),
        max_records_per_partition=_count(options, "maxrecordsperpartition"),
        fail_on_data_loss=_boolean(options, "failondataloss", True),
        include_headers=_boolean(options, "includeheaders", False),
        poll_timeout_s=_number(options, "kafkaconsumer.polltimeoutms", 120_000) / 1000,
        group_join_timeout_s=_number(options, "groupjointimeoutms", 60_000) / 1000,
    )


def write_options(options: Mapping[str, str]) -> WriteOptions:
    options = {key.lower(): value for key, value in options.items()}
    _check_keys(options, "write")
    topic = options.get("topic")
    if topic is not None:
        topic = topic.strip()
        _check_topic_name(topic, "option topic")
    prefix = options.get("transactionalidprefix")
    if prefix is not None:
        prefix = prefix.strip()
        if not prefix:
            raise HerdlessSparkError("option transactionalIdPrefix must not be empty")
        if topic is None:
            # Each task's progress is a group offset on the output topic's partition 0;
            # with a topic column there is no one topic sure to exist.
            raise HerdlessSparkError(
                "option transactionalIdPrefix (exactly-once writes) needs the option topic; "
                "a topic column is not supported with it"
            )
    return WriteOptions(_connection(options), topic, prefix)
