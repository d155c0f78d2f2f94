"""Log levels changed at runtime (BROKER_LOGGER, KIP-412), as Kafka's Log4jController
and RuntimeLoggerManager change log4j's: herdless's Python loggers by their names, the
root logger as `root`, levels by log4j's names. Not stored: a restart brings back the
levels the broker was started with, as in Kafka."""

from __future__ import annotations

import logging

from herdless.broker.dynamic_config.rules import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    DynamicConfigError,
)
from herdless.protocol.errors import ErrorCode

ROOT_LOGGER = "root"
# log4j's levels (Kafka's LogLevelConfig.VALID_LOG_LEVELS) as Python's; TRACE finer than
# DEBUG, as log4j's is.
_TRACE = logging.DEBUG - 5
_LEVELS = {
    "TRACE": _TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}
VALID_LOG_LEVELS = ", ".join(sorted(_LEVELS))


def _logger(name: str) -> logging.Logger | None:
    """The logger of this name if it is there; a package above loggers (herdless.broker)
    is, as Python's logging keeps a place for it, so a level set there reaches them all."""
    if name == ROOT_LOGGER:
        return logging.getLogger()
    if name not in logging.Logger.manager.loggerDict:
        return None
    return logging.getLogger(name)


def level_name(level: int) -> str:
    """A Python level by log4j's name: the nearest at or above it."""
    for name, value in sorted(_LEVELS.items(), key=lambda item: item[1]):
        if level <= value:
            return name
    return "FATAL"


def loggers() -> dict[str, str]:
    """Every logger there is, the root's first, with the level it logs at."""
    found = {ROOT_LOGGER: level_name(logging.getLogger().getEffectiveLevel())}
    for name in sorted(logging.Logger.manager.loggerDict):
        logger = _logger(name)
        if logger is not None:
            found[name] = level_name(logger.getEffectiveLevel())
    return found


def check_operations(operations: list[tuple[str, int, str | None]]) -> None:
    """RuntimeLoggerManager.validateLogLevelConfigs: DynamicConfigError for the first
    operation that cannot be done."""
    for name, op, value in operations:
        if op in (OP_SET, OP_DELETE) and _logger(name) is None:
            raise DynamicConfigError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == OP_SET:
            if value not in _LEVELS:
                raise DynamicConfigError(
                    ErrorCode.INVALID_CONFIG,
                    f"Cannot set the log level of {name} to {value} as it is not a supported"
                    f" log level. Valid log levels are {VALID_LOG_LEVELS}",
                )
        elif op == OP_DELETE:
            if name == ROOT_LOGGER:
                raise DynamicConfigError(
                    ErrorCode.INVALID_REQUEST,
                    f"Removing the log level of the {ROOT_LOGGER} logger is not allowed",
                )
        else:
            what = {OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}.get(op)
            raise DynamicConfigError(
                ErrorCode.INVALID_REQUEST,
                f"{what} operation is not allowed for the BROKER_LOGGER resource"
                if what is not None
                else f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource",
            )


def apply_operations(operations: list[tuple[str, int, str | None]]) -> None:
    """Set or unset the levels (checked by check_operations)."""
    log = logging.getLogger(__name__)
    for name, op, value in operations:
        logger = _logger(name)
        assert logger is not None
        if op == OP_SET:
            assert value is not None
            logger.setLevel(_LEVELS[value])
            log.warning("Updated the log level of %s to %s", name, value)
        else:
            logger.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", name)
