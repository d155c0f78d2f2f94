"""The runtime stays pure: what it imports is read from its source, module by module."""

from __future__ import annotations

import ast
from pathlib import Path

import herdless.coordinator.runtime

PACKAGE = Path(herdless.coordinator.runtime.__file__).parent
# Time, threads, the loop, sockets, files and processes are the broker's.
FORBIDDEN = {
    "asyncio",
    "concurrent",
    "threading",
    "multiprocessing",
    "subprocess",
    "time",
    "datetime",
    "socket",
    "selectors",
    "ssl",
    "os",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "mmap",
}
# Nothing above coordinator/ in the layers (DESIGN.md).
ALLOWED_HERDLESS = ("herdless.coordinator", "herdless.protocol")


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def assert_pure(package: Path) -> None:
    """No module of `package` imports a clock, thread, loop, socket or file, or anything
    above coordinator/."""
    modules = sorted(package.glob("*.py"))
    assert len(modules) > 5
    for module in modules:
        for name in imports(module):
            top = name.split(".")[0]
            assert top not in FORBIDDEN, f"{module.name} imports {name}"
            if top == "herdless":
                assert name.startswith(ALLOWED_HERDLESS), f"{module.name} imports {name}"


def test_the_runtime_imports_no_clock_thread_loop_socket_or_file() -> None:
    assert_pure(PACKAGE)


def test_no_module_of_the_runtime_is_large() -> None:
    for module in PACKAGE.glob("*.py"):
        assert len(module.read_text().splitlines()) <= 400, module.name
