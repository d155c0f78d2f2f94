"""The Python that Spark starts for the herdless data source, without pyspark.zip in front.

Spark starts each of its Python processes (a query's planning process at every
query start, the daemon that forks the read workers) with
`$SPARK_HOME/python/lib/pyspark.zip` first on PYTHONPATH. With PySpark installed
by pip, SPARK_HOME is the installed package itself, so the zip holds the very
modules the interpreter has compiled and cached under site-packages; but
imported from a zip they are compiled again in every process (zipimport keeps
no bytecode). That costs about 0.6 CPU seconds per process on a 2-core machine,
half of a query's time before its first batch (docs/benchmarks.md).

`herdless-spark-python` (this module's main) is the executable register() names
for the herdless source's Python processes where it is safe: local mode, and
the interpreter Spark would have started anyway. It takes out of PYTHONPATH
only zips that belong to the PySpark installed beside them (the same files,
compiled and cached), then becomes that interpreter with the same arguments.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

SCRIPT = "herdless-spark-python"


def redundant_zips(python_path: str) -> set[str]:
    """The entries of `python_path` that are a pip-installed PySpark's own zips.

    `<site-packages>/pyspark/python/lib/pyspark.zip` is redundant when
    `<site-packages>/pyspark/__init__.py` exists; the py4j source zip beside it
    when `<site-packages>/py4j/__init__.py` does.
    """
    redundant = set()
    for entry in python_path.split(os.pathsep):
        path = Path(entry)
        if path.suffix != ".zip" or path.parent.parts[-3:] != ("pyspark", "python", "lib"):
            continue
        site_packages = path.parents[3]
        if path.name == "pyspark.zip":
            package = site_packages / "pyspark"
        elif path.name.startswith("py4j-") and path.name.endswith("-src.zip"):
            package = site_packages / "py4j"
        else:
            continue
        if (package / "__init__.py").is_file():
            redundant.add(entry)
    return redundant


def without_redundant_zips(python_path: str) -> str:
    redundant = redundant_zips(python_path)
    return os.pathsep.join(e for e in python_path.split(os.pathsep) if e not in redundant)


def script_for(python_exec: str, master: str) -> str | None:
    """The executable to start instead of `python_exec`, or None to keep it.

    Only in local mode (executors elsewhere may not have this file), and only
    where `python_exec` is this very interpreter: the script becomes
    sys.executable, which must be what Spark would have run.
    """
    if not master.startswith("local"):
        return None
    if not _same_interpreter(python_exec):
        return None
    script = Path(sysconfig.get_path("scripts")) / SCRIPT
    return str(script) if os.access(script, os.X_OK) else None


def _same_interpreter(python_exec: str) -> bool:
    """Whether `python_exec` starts this interpreter in this environment: the same
    binary, named from the same directory. Two virtual environments share their base
    interpreter's binary, but not the directory their `python` is named from."""
    found = shutil.which(python_exec)
    if found is None:
        return False
    here = os.path.abspath(sys.executable)
    found = os.path.abspath(found)
    return os.path.dirname(found) == os.path.dirname(here) and os.path.samefile(found, here)


def main() -> None:
    """Run the interpreter with these arguments, PySpark's redundant zips left out."""
    python_path = os.environ.get("PYTHONPATH")
    if python_path is not None:
        os.environ["PYTHONPATH"] = without_redundant_zips(python_path)
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
