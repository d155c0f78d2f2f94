"""A transaction ended by someone other than the producer that began it.

Spark decides that a micro-batch succeeded in the driver, after every task has
returned; a task cannot tell from inside write() whether its input was whole
(an upstream failure ends the input iterator as if it were complete). So tasks
leave their transactions open and the driver commits them, as Flink's Kafka
sink does: EndTxn carries only the transactional id, producer id and epoch,
which DescribeTransactions tells whoever asks. librdkafka has no call for
either, so they are spoken here with wire.py's connection (plaintext, as
wire.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import REQUESTS
from herdless.protocol.errors import ErrorCode
from herdless.spark.api_versions import host_port
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.wire import BrokerConnection, WireError

CLIENT_ID = "herdless-spark-sink"
TRANSACTION_COORDINATOR = 1  # FindCoordinator's key type for transactional ids
_FIND_COORDINATOR_VERSIONS = (1, 3)  # one key per request, answered with one address
_DESCRIBE_VERSIONS = (0, 0)
# Below 5: the epoch-bumping EndTxn of KIP-890 part 2 is the producer's own business.
_END_TXN_VERSIONS = (0, 4)
_RETRIABLE = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}
RETRY_BACKOFF_S = 0.1


@dataclass(frozen=True)
class OpenTransaction:
    transactional_id: str
    producer_id: int
    producer_epoch: int


class TransactionControl:
    """Describes and ends transactions through their coordinators, retrying what Kafka
    calls retriable until `timeout_s` has passed."""

    def __init__(self, bootstrap: str, timeout_s: float) -> None:
        self._bootstrap = [host_port(a) for a in bootstrap.split(",") if a.strip()]
        self._timeout_s = timeout_s

    def describe(self, transactional_id: str) -> OpenTransaction:
        """The producer id and epoch of the transaction open under `transactional_id`."""
        describe = REQUESTS[ApiKey.DESCRIBE_TRANSACTIONS]

        def ask(connection: BrokerConnection) -> tuple[int, OpenTransaction | None]:
            version = connection.version(ApiKey.DESCRIBE_TRANSACTIONS, _DESCRIBE_VERSIONS)
            answer = connection.request(
                ApiKey.DESCRIBE_TRANSACTIONS,
                version,
                describe(transactional_ids=[transactional_id]),
            )
            (state,) = answer.transaction_states
            if state.error_code != ErrorCode.NONE:
                return state.error_code, None
            if state.transaction_state != "Ongoing":
                raise HerdlessSparkError(
                    f"transaction {transactional_id} is {state.transaction_state}, not open"
                )
            found = OpenTransaction(transactional_id, state.producer_id, state.producer_epoch)
            return ErrorCode.NONE, found

        found = self._with_coordinator(transactional_id, "describe", ask)
        assert found is not None
        return found

    def end(self, transaction: OpenTransaction, commit: bool) -> None:
        end_txn = REQUESTS[ApiKey.END_TXN]

        def ask(connection: BrokerConnection) -> tuple[int, None]:
            answer = connection.request(
                ApiKey.END_TXN,
                connection.version(ApiKey.END_TXN, _END_TXN_VERSIONS),
                end_txn(
                    transactional_id=transaction.transactional_id,
                    producer_id=transaction.producer_id,
                    producer_epoch=transaction.producer_epoch,
                    committed=commit,
                ),
            )
            return answer.error_code, None

        self._with_coordinator(transaction.transactional_id, "commit" if commit else "abort", ask)

    def _with_coordinator(self, transactional_id: str, doing: str, ask):
        deadline = time.monotonic() + self._timeout_s
        problem = ""
        while True:
            connection = None
            try:
                connection = self._coordinator(transactional_id)
                code, result = ask(connection)
            except WireError as exc:
                code, result, problem = None, None, str(exc)
            finally:
                if connection is not None:
                    connection.close()
            if code == ErrorCode.NONE:
                return result
            if code is not None:
                error = ErrorCode(code)
                if error not in _RETRIABLE:
                    raise HerdlessSparkError(
                        f"could not {doing} transaction {transactional_id}: the broker "
                        f"answered {error.name}"
                    )
                problem = error.name
            if time.monotonic() > deadline:
                raise HerdlessSparkError(
                    f"could not {doing} transaction {transactional_id} within "
                    f"{self._timeout_s:g}s ({problem})"
                )
            time.sleep(RETRY_BACKOFF_S)

    def _coordinator(self, transactional_id: str) -> BrokerConnection:
        find = REQUESTS[ApiKey.FIND_COORDINATOR]
        failures = []
        for host, port in self._bootstrap:
            try:
                connection = BrokerConnection(host, port, CLIENT_ID, self._timeout_s)
            except WireError as exc:
                failures.append(str(exc))
                continue
            try:
                version = connection.version(ApiKey.FIND_COORDINATOR, _FIND_COORDINATOR_VERSIONS)
                answer = connection.request(
                    ApiKey.FIND_COORDINATOR,
                    version,
                    find(key=transactional_id, key_type=TRANSACTION_COORDINATOR),
                )
            except WireError as exc:
                connection.close()
                failures.append(str(exc))
                continue
            if answer.error_code != ErrorCode.NONE:
                connection.close()
                failures.append(f"{connection.address}: {ErrorCode(answer.error_code).name}")
                continue
            if (answer.host, answer.port) == (host, port):
                return connection
            connection.close()
            return BrokerConnection(answer.host, answer.port, CLIENT_ID, self._timeout_s)
        raise WireError("; ".join(failures) or "no bootstrap server given")
