"""What `pip install .` installs: every file of the package the code reads at run time."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_the_wheel_carries_every_file_of_the_package(tmp_path: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert tracked, "not a git checkout"
    # The tracked files alone, as a fresh clone has them: no egg-info left by an
    # editable install, whose file list would add what the configuration leaves out.
    source = tmp_path / "source"
    for path in tracked:
        if (ROOT / path).is_file():
            (source / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / path, source / path)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("herdless-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    expected = {path.removeprefix("src/") for path in tracked if path.startswith("src/herdless/")}
    # Schemas, templates, static files: data the package opens at run time.
    assert sorted(expected - shipped) == []
