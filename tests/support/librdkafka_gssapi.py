"""confluent-kafka with Kerberos, for the GSSAPI tests.

confluent-kafka's wheels carry a librdkafka built without Cyrus SASL, so they refuse
GSSAPI ("No provider for SASL mechanism GSSAPI"), and Debian's librdkafka (2.0) is too old
to build a current confluent-kafka against. So the tests build their own pair, once per
machine, into a cache outside the repository:

- librdkafka from the source Confluent ships inside its JavaScript client on npm
  (`@confluentinc/kafka-javascript`, checked against npm's sha512), configured with Cyrus
  SASL (Debian's libsasl2-dev; the GSSAPI plugin is libsasl2-modules-gssapi-mit);
- confluent-kafka of the same minor version from its PyPI source, linked against it.

The tests run that confluent-kafka in a child process with `site_packages()` first on
its path; the rest of the suite keeps the wheel. Run `python -m
tests.support.librdkafka_gssapi` to build (the README's test command does).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

LIBRDKAFKA_VERSION = "2.15.1"
SOURCE_URL = (
    "https://registry.npmjs.org/@confluentinc/kafka-javascript/-/kafka-javascript-1.10.1.tgz"
)
SOURCE_SHA512 = (
    "KVePUBn21EqCVP9mfxzEuM3SYJHHEF7X+iiC2e43QQgDSyEaksInmCGooT3w5q+cNAdkSCrK71j0ICfqoSqZLw=="
)
SOURCE_DIRECTORY = "package/deps/librdkafka/"
# The Python client whose minor version matches the librdkafka above.
CONFLUENT_KAFKA = "confluent-kafka==2.15.1"
# Only what GSSAPI needs beyond the defaults; the other codecs' libraries are not needed.
CONFIGURE = ["--disable-zstd", "--disable-lz4-ext", "--disable-curl"]


def cache_directory() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return (
        base
        / "herdless-tests"
        / f"{CONFLUENT_KAFKA.replace('==', '-')}-librdkafka-{LIBRDKAFKA_VERSION}-gssapi"
    )


def site_packages() -> Path:
    """Where the Kerberos-capable confluent-kafka is; fails loudly if it was not built."""
    site = cache_directory() / "site"
    if not (site / "confluent_kafka").is_dir():
        raise RuntimeError(
            f"confluent-kafka with GSSAPI is not built in {site}:"
            " run `python -m tests.support.librdkafka_gssapi`"
        )
    return site


def build() -> Path:
    """Build librdkafka and confluent-kafka into the cache unless they are there already."""
    target = cache_directory()
    site = target / "site"
    if (site / "confluent_kafka").is_dir():
        print(f"confluent-kafka with GSSAPI: already built in {site}")
        return site
    prefix = target / "librdkafka"
    with tempfile.TemporaryDirectory(prefix="librdkafka-") as scratch:
        source = unpack(download(), Path(scratch))
        print(f"building librdkafka {LIBRDKAFKA_VERSION} with Cyrus SASL into {prefix}")
        run(["./configure", f"--prefix={prefix}", *CONFIGURE], source)
        run(["make", f"-j{os.cpu_count() or 2}", "-C", "src"], source)
        run(["make", "-C", "src", "install"], source)
    print(f"building {CONFLUENT_KAFKA} against it into {site}")
    # Built in a scratch directory first, so that a failed build leaves no half a client
    # that site_packages() would take for a whole one.
    partial = target / "site.partial"
    shutil.rmtree(partial, ignore_errors=True)
    environment = {
        **os.environ,
        "C_INCLUDE_PATH": str(prefix / "include"),
        "LIBRARY_PATH": str(prefix / "lib"),
        "LDFLAGS": f"-Wl,-rpath,{prefix / 'lib'}",
    }
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-binary", "confluent-kafka"]
    run([*pip, "--target", str(partial), CONFLUENT_KAFKA], target, environment)
    shutil.rmtree(site, ignore_errors=True)
    partial.rename(site)
    return site


def download() -> bytes:
    print(f"downloading librdkafka {LIBRDKAFKA_VERSION}'s source from {SOURCE_URL}")
    with urllib.request.urlopen(SOURCE_URL, timeout=120) as response:
        data: bytes = response.read()
    digest = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if digest != SOURCE_SHA512:
        raise RuntimeError(f"{SOURCE_URL}: sha512 {digest}, expected {SOURCE_SHA512}")
    return data


def unpack(data: bytes, into: Path) -> Path:
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(SOURCE_DIRECTORY)]
        archive.extractall(into, members=members, filter="tar")
    return into / SOURCE_DIRECTORY


def run(command: list[str], cwd: Path, environment: dict[str, str] | None = None) -> None:
    cwd.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise RuntimeError(f"{' '.join(command)} failed in {cwd}:\n{tail}")


def run_confluent_with_gssapi(
    settings: dict[str, str],
    topic: str,
    group: str,
    producer_settings: dict[str, Any] | None = None,
) -> list[bytes]:
    """secured_clients.run_confluent, in a child process whose confluent-kafka is the one
    built here: what it consumed."""
    site = site_packages()
    script = (
        "import json, sys, confluent_kafka\n"
        f"assert confluent_kafka.__file__.startswith({str(site)!r}), confluent_kafka.__file__\n"
        "from tests.support.secured_clients import run_confluent\n"
        "arguments = json.loads(sys.argv[1])\n"
        "print(json.dumps([v.decode() for v in run_confluent(*arguments)]))\n"
    )
    root = Path(__file__).resolve().parents[2]
    arguments = [settings, topic, group, producer_settings or {}]
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(arguments)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(root)])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [value.encode() for value in json.loads(done.stdout.splitlines()[-1])]


if __name__ == "__main__":
    try:
        build()
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
