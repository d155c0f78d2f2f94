"""herdless-spark-python: the source's Python processes import PySpark from site-packages."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pyspark

from herdless.spark.python_exec import SCRIPT, redundant_zips, script_for, without_redundant_zips

# The zips Spark puts first on its Python processes' PYTHONPATH, from pip's PySpark.
SPARK_LIB = Path(pyspark.__file__).parent / "python" / "lib"


def _fake_install(root: Path, *packages: str) -> Path:
    lib = root / "site-packages" / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    for package in packages:
        (root / "site-packages" / package).mkdir(exist_ok=True)
        (root / "site-packages" / package / "__init__.py").write_text("")
    return lib


def test_only_an_installed_pysparks_own_zips_are_redundant(tmp_path: Path) -> None:
    lib = _fake_install(tmp_path / "full", "pyspark", "py4j")
    pyspark_zip, py4j_zip = str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")
    other = str(tmp_path / "elsewhere" / "pyspark.zip")
    path = os.pathsep.join([pyspark_zip, py4j_zip, other, "/opt/app"])
    assert redundant_zips(path) == {pyspark_zip, py4j_zip}
    assert without_redundant_zips(path) == os.pathsep.join([other, "/opt/app"])
    # A SPARK_HOME that is not an installed package (a Spark distribution) keeps its zips.
    bare = _fake_install(tmp_path / "distribution")
    kept = os.pathsep.join([str(bare / "pyspark.zip"), str(bare / "py4j-0.10.9.9-src.zip")])
    assert without_redundant_zips(kept) == kept


def test_the_script_replaces_only_this_interpreter_in_local_mode() -> None:
    installed = Path(sysconfig.get_path("scripts")) / SCRIPT
    assert installed.is_file(), f"{installed} missing: pip install -e . installs it"
    assert script_for(sys.executable, "local[2]") == str(installed)
    assert script_for(sys.executable, "spark://cluster:7077") is None
    assert script_for("/nonexistent/python3", "local[2]") is None


def test_another_environment_on_the_same_interpreter_keeps_its_python(tmp_path: Path) -> None:
    # A virtual environment's python is a link to the base interpreter, as this one may be.
    other = tmp_path / "venv" / "bin"
    other.mkdir(parents=True)
    (other / "python").symlink_to(os.path.realpath(sys.executable))
    assert script_for(str(other / "python"), "local[2]") is None


def test_the_script_runs_python_with_pyspark_from_site_packages() -> None:
    zips = sorted(str(p) for p in SPARK_LIB.glob("*.zip"))
    assert any(z.endswith("pyspark.zip") for z in zips), f"no pyspark.zip in {SPARK_LIB}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*zips, "/opt/app"]))
    script = Path(sysconfig.get_path("scripts")) / SCRIPT
    shown = subprocess.run(
        [
            str(script),
            "-c",
            "import os, pyspark; print(pyspark.__file__); print(os.environ['PYTHONPATH'])",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.splitlines()
    assert shown == [pyspark.__file__, "/opt/app"]


def test_the_test_session_starts_the_source_through_the_script(spark) -> None:
    context = spark.sparkContext
    assert script_for(context.pythonExec, context.master) is not None
