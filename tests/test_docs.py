"""Documentation that states facts the code decides: kept equal to the code."""

from __future__ import annotations

import re
from pathlib import Path

from herdless.broker.apis import APIS

DOCS = Path(__file__).parents[1] / "docs"


def test_compatibility_table_is_what_api_versions_advertises() -> None:
    text = (DOCS / "compatibility.md").read_text()
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (\d+)–(\d+) \|$", text, flags=re.MULTILINE)
    documented = {(int(k), name, int(lo), int(hi)) for k, name, lo, hi in rows}
    served = {(a.key, a.name, a.min_version, a.max_version) for a in APIS.values()}
    assert documented == served, (
        f"docs/compatibility.md lists {sorted(documented - served)} that are not served and "
        f"misses {sorted(served - documented)}"
    )
