"""`herdless serve`: run the broker until SIGTERM or SIGINT.

Settings come from a Kafka-style properties file, then `--set`, then the options,
each later one winning; all of them are checked before anything starts, and a
setting that cannot be used is named in one line (exit code 2).
"""

from __future__ import annotations

import enum
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from herdless.cli.errors import USAGE, fail

if TYPE_CHECKING:
    from herdless.broker.broker import Broker
    from herdless.broker.config import BrokerConfig
    from herdless.console.login import Login
    from herdless.console.server import Console


class LogLevel(enum.StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to listen on.", show_default="127.0.0.1")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(help="Port to listen on; 0 for any free one.", show_default="9092"),
    ] = None,
    advertised_host: Annotated[
        str | None,
        typer.Option(help="Host clients are told to connect to.", show_default="--host"),
    ] = None,
    advertised_port: Annotated[
        int | None,
        typer.Option(help="Port clients are told to connect to.", show_default="--port"),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(help="Where partition logs live.", show_default="./herdless-data"),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="Serve Prometheus metrics (group lag, members, requests) on this port"
            " at /metrics; 0 for any free one.",
            show_default="off",
        ),
    ] = None,
    console_port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65_535,
            help="Serve the web console (brokers, topics, groups, lag, rebalances) on this"
            " port; 0 for any free one.",
            show_default="off",
        ),
    ] = None,
    console_host: Annotated[
        str,
        typer.Option(
            help="Address the console listens on (this machine only unless told;"
            " 0.0.0.0 for every address).",
        ),
    ] = "127.0.0.1",
    console_ssl_keystore: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Serve the console over HTTPS with the private key and certificate chain"
            " in this PEM file.",
        ),
    ] = None,
    console_command_config: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="How the console's own client connects to this broker: client settings in"
            " Kafka's names, bootstrap.servers naming the listener (the first one unless"
            " it does).",
        ),
    ] = None,
    console_login: Annotated[
        bool,
        typer.Option(
            help="Ask for a user name and password (this broker's SCRAM credentials) and"
            " show each user only the topics and groups their ACLs let them describe.",
        ),
    ] = False,
    zookeeper: Annotated[
        str | None,
        typer.Option(
            help="Join the cluster whose metadata is in this ZooKeeper, host:port[/chroot]"
            " (zookeeper.connect).",
            show_default="off: one broker alone",
        ),
    ] = None,
    broker_id: Annotated[
        int | None,
        typer.Option(
            help="This broker's id in the cluster (broker.id).", show_default="broker.id, else 0"
        ),
    ] = None,
    rack: Annotated[
        str | None,
        typer.Option(help="This broker's rack, for spreading replicas (broker.rack)."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="Kafka-style broker properties file (e.g. num.partitions=3)."),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set", metavar="KEY=VALUE", help="A broker property, key=value; repeatable."
        ),
    ] = None,
    log_level: Annotated[LogLevel, typer.Option(case_sensitive=False)] = LogLevel.INFO,
) -> None:
    """Run a broker with its data on local disk: alone, or in a cluster with --zookeeper."""
    from herdless.broker.config import BrokerConfig, ConfigError, read_properties
    from herdless.cli.options import read_command_config

    broker_config = BrokerConfig()
    try:
        if config is not None:
            broker_config.apply_properties(read_properties(config))
        overrides = {}
        for item in set_ or []:
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"--set expects key=value, got {item!r}")
            overrides[key.strip()] = value
        broker_config.apply_properties(overrides)
        if (host is not None or port is not None) and broker_config.security.get("listeners"):
            raise ConfigError(
                "--host and --port are the shorthand for one PLAINTEXT listener;"
                " with `listeners` set, give the addresses there"
            )
        # Options given on the command line win over the file.
        options = {
            "host": host,
            "port": port,
            "data_dir": data_dir,
            "metrics_port": metrics_port,
            "advertised_host": advertised_host,
            "advertised_port": advertised_port,
            "zookeeper_connect": zookeeper,
            "node_id": broker_id,
            "rack": rack,
        }
        for name, value in options.items():
            if value is not None:
                setattr(broker_config, name, value)
        broker_config.validate()
        if console_port:
            _check_console_port(broker_config, console_port)
        console_settings = None
        if console_command_config is not None:
            try:
                console_settings = read_command_config(console_command_config)
            except ValueError as exc:
                raise ConfigError(f"--console-command-config: {exc}") from None
    except ConfigError as exc:
        raise fail(str(exc), USAGE) from None
    _check_ports_free(broker_config)
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    web = None
    if console_port is not None:
        from herdless.cli.console import open_console

        # Before the broker starts: a port in use stops it from starting at all.
        web = open_console(
            console_host,
            console_port,
            ssl_keystore=console_ssl_keystore,
            login_required=console_login,
            settings=console_settings,
            metrics_urls=_own_metrics_url(broker_config),
        )
    try:
        _run(broker_config, web)
    finally:
        if web is not None:
            web.stop()


def _own_metrics_url(config: BrokerConfig) -> list[str]:
    """Where the console's Clients page reads this broker's clients' pushed metrics."""
    if not config.metrics_port:
        return []
    host = config.metrics_host
    host = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
    shown = f"[{host}]" if ":" in host else host
    return [f"http://{shown}:{config.metrics_port}/metrics"]


def _check_console_port(config: BrokerConfig, console_port: int) -> None:
    from herdless.broker.config import ConfigError

    for name, taken in (("--port", config.port), ("--metrics-port", config.metrics_port)):
        if console_port == taken:
            raise ConfigError(f"--console-port {console_port} is the {name} too; give another")


def _check_ports_free(config: BrokerConfig) -> None:
    """Before the data directory is touched or anything says "listening": a port
    another process holds is named, with the option that chose it."""
    from herdless.cli.ports import in_use

    if config.security.get("listeners"):
        wanted = [
            (f"port in listeners ({e.listener})", e.host, e.port)
            for e in config.listener_endpoints()
        ]
    else:
        wanted = [("--port", config.host, config.port)]
    if config.metrics_port is not None:
        wanted.append(("--metrics-port", config.metrics_host, config.metrics_port))
    for option, host, port in wanted:
        taken = in_use(host, port)
        if taken is not None:
            raise fail(f"cannot listen on {taken}; give another {option}")


def _run(config: BrokerConfig, web: Console | None = None) -> None:
    import asyncio

    from herdless.broker.broker import ClusterIdMismatch
    from herdless.broker.config import ConfigError
    from herdless.cluster.errors import ClusterError
    from herdless.storage import LogFileError, StorageError

    _tune_garbage_collection()
    try:
        import uvloop
    except ImportError:  # uvloop is optional off Linux/macOS
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        runner(_serve_until_signal(config, web))
    except ConfigError as exc:
        # Settings read when the listeners are built: keystores, keytabs, mechanisms.
        raise fail(str(exc), USAGE) from None
    except (ClusterError, ClusterIdMismatch) as exc:
        # ZooKeeper unreachable, this broker id taken, another cluster's data...
        raise fail(str(exc)) from None
    except LogFileError as exc:
        # A partition's file that cannot be used: the message names it and says why.
        raise fail(str(exc)) from None
    except StorageError as exc:
        # The data directory's own words: in use by another broker, unreadable...
        raise fail(_about_data_dir(config.data_dir, str(exc))) from None
    except OSError as exc:
        if exc.filename is not None:  # a file or directory, not a socket
            raise fail(_about_data_dir(config.data_dir, _os_reason(exc, config.data_dir))) from None
        # asyncio's words name the address it could not bind, the broker's or metrics'.
        raise fail(f"cannot listen: {exc.strerror or exc}") from None


def _about_data_dir(data_dir: Path, reason: str) -> str:
    if reason.startswith(str(data_dir)):  # the reason names the directory already
        return f"data directory {reason}"
    return f"cannot use data directory {data_dir}: {reason}"


def _os_reason(exc: OSError, data_dir: Path) -> str:
    path = Path(exc.filename)
    if isinstance(exc, FileExistsError) and path.exists() and not path.is_dir():
        return f"{path} is not a directory"
    return exc.strerror if path == data_dir else f"{exc.strerror} ({path})"


def _tune_garbage_collection() -> None:
    """Collect the young generations rarely and never scan what startup loaded.

    Measured with 7,500 simulated group members: CPython's default thresholds ran
    a full collection every 0.5-3 s, 90-390 ms each, freeing nothing; heartbeat
    p99 went from 420 ms to 94 ms and broker CPU from 48% to 33% with these.
    """
    import gc

    gc.set_threshold(100_000, 50, 1000)


async def _serve_until_signal(config: BrokerConfig, web: Console | None) -> None:
    import asyncio
    import signal

    from herdless.broker.broker import Broker

    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    # SIGTERM while starting (a cluster broker may wait for ZooKeeper, or for its
    # previous life's session to expire) stops the start too.
    starting = asyncio.ensure_future(broker.start())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if starting.done():
            starting.result()  # a failed start raises here
            if web is not None:
                _start_console(web, config, broker)
            await stopping
        else:
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
    finally:
        stopping.cancel()
        if web is not None:
            # Its client goes first: the broker then has one connection less to wait for.
            await asyncio.to_thread(web.stop)
        watchdog = loop.call_later(SLOW_STOP_S, _report_slow_stop)
        try:
            await broker.stop()
        finally:
            watchdog.cancel()


def _start_console(web: Console, config: BrokerConfig, broker: Broker) -> None:
    """The console asks this broker over its own port, like any client."""
    import logging

    from herdless.console.server import WILDCARD_HOSTS

    assert broker.context is not None, "started"
    # Its client (kafka-python) tells of every connection, and warns of its own I/O
    # thread's slow tasks as "blocking the event loop": not the broker's news. The
    # console's pages say when the broker does not answer it.
    logging.getLogger("kafka").setLevel(logging.ERROR)
    host = "127.0.0.1" if config.host in WILDCARD_HOSTS else config.host
    shown = f"[{host}]" if ":" in host else host
    web.start(f"{shown}:{broker.context.bound_port}", login=_console_login(web, broker))
    logging.getLogger("herdless.console").info("console at %s", web.url)


def _console_login(web: Console, broker: Broker) -> Login | None:
    """The console's login, checked as this broker checks a SASL PLAIN login (against its
    SCRAM credentials) and filtered by its authorizer: the console is in its process."""
    import functools

    from herdless.console.login import BrokerLogin
    from herdless.security.scram import verify_plain

    if not web.login_required:
        return None
    assert broker.context is not None, "started"
    acls = broker.context.acls
    return BrokerLogin(
        functools.partial(verify_plain, broker.credentials),
        acls.authorizer if acls is not None else None,
    )


# After this long, a stopping broker says what it is still waiting for.
SLOW_STOP_S = 15.0


def _report_slow_stop() -> None:
    import asyncio
    import io
    import logging

    log = logging.getLogger("herdless.broker.broker")
    for task in asyncio.all_tasks():
        stack = io.StringIO()
        task.print_stack(file=stack)
        log.warning("still stopping after %.0fs: %s\n%s", SLOW_STOP_S, task, stack.getvalue())
