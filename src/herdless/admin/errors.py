"""How the admin client fails: with its reason in one line of words."""

from __future__ import annotations


class AdminError(Exception):
    """A failure to reach the brokers or to read what was asked, in words a person
    reads at once (`no broker answers at 127.0.0.1:9092`): a command prints it as its
    `error:` line, the console shows it on its page."""
