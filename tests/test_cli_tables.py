"""How a table fits a terminal (cli/fitted_table.py), and how /proc names a listener's
address (cli/ports.py): the pure rules under `herdless`'s tables and port checks."""

from __future__ import annotations

import ipaddress
import re

import pytest
from rich.console import Console

from herdless.cli.fitted_table import SHORT_TOKEN, FittedTable, fits, min_widths
from herdless.cli.ports import proc_net_address

COLUMNS = ("BROKER", "HOST", "OFFSETS-LEADER-OF")
ROWS = [("1", "127.0.0.1", "17"), ("2", "127.0.0.1", "3")]


def shown(table: FittedTable, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def test_a_column_is_as_wide_as_its_header_and_its_short_values() -> None:
    long_name = "x" * (SHORT_TOKEN + 1)
    assert min_widths(COLUMNS, [("1", "127.0.0.1", "17"), ("2", long_name, "3")]) == [6, 9, 17]
    # Words of a value count one by one: a value with spaces may wrap between them.
    assert min_widths(("M",), [("topic[0,1] other[2]",)]) == [10]


def test_fits_counts_the_frame() -> None:
    widths = min_widths(COLUMNS, ROWS)
    needed = sum(widths) + 3 * len(widths) + 1
    assert fits(widths, needed) and not fits(widths, needed - 1)


@pytest.mark.parametrize("width", [30, 41, 80])
def test_headers_and_addresses_are_never_split(width: int) -> None:
    text = shown(FittedTable(COLUMNS, ROWS), width)
    words = set(re.split(r"[\s│┃|─━┏┓┗┛┡┩└┘┳┻╇┴]+", text))
    assert {"BROKER", "HOST", "OFFSETS-LEADER-OF", "127.0.0.1"} <= words, text
    assert max(len(line) for line in text.splitlines()) <= width


def test_rows_become_records_when_the_table_cannot_fit() -> None:
    text = shown(FittedTable(COLUMNS, ROWS), 30)
    assert "1 of 2" in text and "2 of 2" in text
    assert re.search(r"^HOST\s+127\.0\.0\.1\s*$", text, flags=re.MULTILINE), text


def test_a_long_value_folds_in_a_table_that_fits() -> None:
    text = shown(FittedTable(("TOPIC", "P"), [("t" * 100, "0")]), 60)
    assert "┃ TOPIC" in text and "1 of 1" not in text


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("0100007F", "127.0.0.1"),
        ("00000000", "0.0.0.0"),
        ("00000000000000000000000001000000", "::1"),
        ("0000000000000000FFFF00000100007F", "127.0.0.1"),  # ::ffff:127.0.0.1, as Java binds
    ],
)
def test_proc_net_tcp_addresses_read_as_the_kernel_wrote_them(text: str, address: str) -> None:
    assert proc_net_address(text) == ipaddress.ip_address(address)
