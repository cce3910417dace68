"""A throwaway PostgreSQL server for the benchmarks: started, used, stopped, removed.

The benches need a real server with the durability a deployment has (``fsync``
and ``synchronous_commit`` on, unlike the test suite's server, which turns
fsync off to save time), and room for a hundred writers' connections. Debian
keeps the server binaries under /usr/lib/postgresql/VERSION/bin; initdb and
postgres refuse to run as root, so as root they run as the ``postgres`` user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    initdb = found[-1] if found else shutil.which("initdb")
    if not initdb:
        raise SystemExit("no PostgreSQL server binaries (Debian: apt-get install postgresql)")
    return Path(initdb).parent


def _run_as() -> dict[str, Any]:
    if os.geteuid() != 0:
        return {}
    user = pwd.getpwnam("postgres")
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


@contextlib.contextmanager
def throwaway_server(*, fsync: bool = True, max_connections: int = 300) -> Iterator[str]:
    """A conninfo string of a fresh server on a Unix socket in a new /tmp directory."""
    bindir, run_as = _bindir(), _run_as()
    base = Path(tempfile.mkdtemp(prefix="tapelog-bench-pg-", dir="/tmp"))
    if run_as:
        os.chown(base, run_as["user"], run_as["group"])

    def pg(*args: str) -> None:
        done = subprocess.run(
            [str(bindir / args[0]), *args[1:]],
            cwd=base,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            **run_as,
        )
        if done.returncode != 0:
            raise SystemExit(f"{args[0]} failed: {done.stderr.strip()}")

    data = str(base / "data")
    try:
        pg("initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C")
        options = (
            f"-k {base} -c listen_addresses='' -c fsync={'on' if fsync else 'off'} "
            f"-c synchronous_commit=on -c max_connections={max_connections}"
        )
        pg("pg_ctl", "-D", data, "-l", str(base / "server.log"), "-o", options, "-w", "start")
        try:
            yield f"host={base} user=postgres dbname=postgres"
        finally:
            pg("pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(base, ignore_errors=True)
