"""The one exception type this data source raises for bad input or an unusable broker."""

from __future__ import annotations


class HerdlessSparkError(ValueError):
    """A problem the user can fix: a bad option, a missing topic, an unreachable broker.

    Spark wraps exceptions raised in Python data sources; the message is written to
    make sense on its own inside that wrapper, so it always says which option,
    topic or address is at fault.
    """
