"""A private PostgreSQL cluster for outage tests: ours to restart, stop and break.

The shared test server (DURABLE_TEST_POSTGRES_URL) must never be restarted under
other tests, so outage tests make their own: ``initdb`` into a fresh directory (about
0.75 s here), start it on a free loopback port with its socket in that directory,
and remove it afterwards. Every ``pg_ctl`` call names our data directory, so only the
postmaster we started is ever signalled.

PostgreSQL refuses to run as root. When the tests run as root (CI does), the
binaries run as the ``postgres`` OS user through ``runuser``, and the directory is
handed to that user; otherwise they run as the current user.

Binaries come from DURABLE_PG_BIN, else the newest /usr/lib/postgresql/*/bin. If
there are none the tests skip locally, and fail in CI (DURABLE_REQUIRE_POSTGRES=1):
the outage tests must not silently stop running.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REQUIRE_POSTGRES = os.environ.get("DURABLE_REQUIRE_POSTGRES") == "1"


def find_bindir() -> Path | None:
    """The directory holding initdb and pg_ctl, or None if PostgreSQL is not installed."""
    configured = os.environ.get("DURABLE_PG_BIN")
    if configured:
        return Path(configured)
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1].parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PgCluster:
    """One PostgreSQL cluster in a temporary directory, on 127.0.0.1:*port*.

    Use `PgCluster.running()`; `url` is a superuser URL (trust authentication) for
    the ``postgres`` database.
    """

    def __init__(self, bindir: Path, root: Path, port: int) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.logfile = root / "server.log"
        self.port = port
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        self._as_postgres = os.geteuid() == 0

    @classmethod
    @contextlib.contextmanager
    def running(cls) -> Iterator[PgCluster]:
        """initdb, start, yield the running cluster; stop it and delete it afterwards."""
        bindir = find_bindir()
        if bindir is None or not (bindir / "initdb").exists():
            message = (
                "PostgreSQL server binaries (initdb, pg_ctl) are not installed; install "
                "the postgresql package or set DURABLE_PG_BIN to their directory."
            )
            if REQUIRE_POSTGRES:
                pytest.fail(message)
            pytest.skip(message)
        # Not under pytest's tmp_path: that is private to root (mode 700), and the
        # server runs as the postgres user.
        root = Path(tempfile.mkdtemp(prefix="durable-pg-"))
        cluster = cls(bindir, root, free_port())
        try:
            cluster._init()
            cluster.start()
            yield cluster
        finally:
            cluster._destroy()

    # -- control ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -k {self.root} "
            "-c max_connections=60 -c shared_buffers=16MB -c fsync=off"
        )
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.logfile), "-o", options)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: roll back sessions; ``immediate``: crash it)."""
        self._pg_ctl("stop", "-w", "-t", "60", "-m", mode)

    def restart(self, mode: str = "immediate") -> None:
        """Restart; ``immediate`` is a crash followed by recovery, like a power cut of
        the server process (committed work survives, sessions die mid-statement)."""
        self._pg_ctl("restart", "-w", "-t", "60", "-m", mode, "-l", str(self.logfile))

    def running_now(self) -> bool:
        """Whether our postmaster runs (pg_ctl status)."""
        return self._pg_ctl("status", check=False).returncode == 0

    def log(self) -> str:
        """The server's log so far."""
        return self.logfile.read_text(errors="replace") if self.logfile.exists() else ""

    # -- internals -------------------------------------------------------------------

    def _init(self) -> None:
        if self._as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        )

    def _pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), *args, check=check)

    def _run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        # Output to a file, not a pipe: a postmaster started by pg_ctl inherits it and
        # would hold a pipe open for as long as it runs.
        with tempfile.TemporaryFile("w+") as output:
            result = subprocess.run(
                [*prefix, *command],
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                check=False,
                timeout=120,
            )
            output.seek(0)
            said = output.read()
        if check and result.returncode != 0:
            raise AssertionError(
                f"{' '.join(command)} failed ({result.returncode}):\n{said}\n{self.log()[-3000:]}"
            )
        return result

    def _destroy(self) -> None:
        try:
            if self.data.exists() and self.running_now():
                with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
                    self.stop("fast")
                if self.running_now():
                    self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


_SSL_REQUEST, _GSS_REQUEST = 80877103, 80877104


class Knocks:
    """While the server is down, answers its port and counts connection attempts.

    Each client that connects is let past the SSL question (answered "no", so that
    one attempt is one connection) and then hung up on, as a crashing server would:
    to the client it is one failed attempt, like a refused connection.
    """

    def __init__(self, port: int) -> None:
        self.count = 0
        self._socket = socket.create_server(("127.0.0.1", port))
        self._socket.settimeout(0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="knocks", daemon=True)

    @classmethod
    @contextlib.contextmanager
    def on(cls, port: int) -> Iterator[Knocks]:
        """Count the knocks on *port* (free: the server is stopped) while inside."""
        knocks = cls(port)
        knocks._thread.start()
        try:
            yield knocks
        finally:
            knocks._stop.set()
            knocks._thread.join()
            knocks._socket.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._socket.accept()
            except TimeoutError:
                continue
            self.count += 1
            with conn, contextlib.suppress(OSError):
                conn.settimeout(1.0)
                head = conn.recv(8)
                if len(head) == 8 and int.from_bytes(head[4:], "big") in (
                    _SSL_REQUEST,
                    _GSS_REQUEST,
                ):
                    conn.sendall(b"N")
                    conn.recv(1024)  # the startup packet; then hang up
