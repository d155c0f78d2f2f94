"""The API keys herdless serves and sends, by Kafka's names (its ApiKeys enum).

The one table of them: every module that names an API names it here, never by its
number. The numbers are the `apiKey` of Kafka's message schemas, which kafka-python's
message classes carry as API_KEY; tests hold each member to its class (codec.REQUESTS).
They are written out rather than read from those classes so that this module imports
nothing: the Spark planning process asks a broker which APIs it serves without paying
the fifth of a second that importing kafka-python costs (spark/api_versions.py).
"""

from __future__ import annotations

from enum import IntEnum


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    CONSUMER_GROUP_HEARTBEAT = 68
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_DESCRIBE = 69
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    # ListClientMetricsResources until Kafka 4.1 renamed it (KIP-1142).
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92

    @property
    def kafka_name(self) -> str:
        """The API's name in Kafka's schemas and logs: Produce, OffsetForLeaderEpoch."""
        return "".join(part.capitalize() for part in self.name.split("_"))
