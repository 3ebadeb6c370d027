"""What open dashboard tabs cost the database: ``python benchmarks/live.py [--quick]``.

One JSON line per backend (SQLite, PostgreSQL) on stdout; progress on stderr.

A web app (`durable.web.make_app` under `serve`) runs in this process; another process
completes runs at a steady rate (``--rate``, 5 a second) against the same database.
Every statement the web app's connections execute is counted (durable's SQL backend
uses the drivers' own connections, not a SQLAlchemy engine, so the count wraps each
session's ``execute``). Clients are threads here, each one "tab":

* live: each follows ``api/v1/live`` and, at every version it sends, fetches the runs
  page (``api/v1/runs?limit=50``) and the overview (``api/v1/overview``, or
  ``api/v1/queues`` where there is no overview yet), as the dashboard's pages do.
* polling: each fetches the same two every 5 s, as every tab did before live updates.

Reported, for 1 and for 20 tabs: statements_per_s (the web app's), requests_per_s
(the clients'), versions_per_s (what one stream sent). Target: live with 20 tabs costs
the database what live with 1 does (``ratio_20_to_1`` near 1).
"""

from __future__ import annotations

import sys

# The benchmarks directory holds queue.py, which would shadow the standard library:
# move it from the front of sys.path (where Python puts a script's) to the end.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]
sys.path.append(__file__.rsplit("/", 1)[0])

import argparse
import http.client
import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _pg_schemas import drop_schema, fresh_schema

import durable
from durable.backends import _connections
from durable.web import make_app, serve

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
TOKEN = "live-benchmark"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
POLL_SECONDS = 5.0


@durable.workflow
def noop(n: int) -> int:
    return n


class Counter:
    """Counts the statements executed on every session opened from now on."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()
        original = _connections.Session.__init__

        def init(session: Any, conn: Any, cursor: Any = None, generation: int = 0) -> None:
            original(session, conn, cursor, generation)
            execute = session.execute

            def counted(*args: Any, **kwargs: Any) -> Any:
                with self._lock:
                    self.count += 1
                return execute(*args, **kwargs)

            session.execute = counted

        _connections.Session.__init__ = init  # type: ignore[method-assign]


def complete_runs(url: str, rate: float) -> None:
    """The background process: dispatch *rate* runs a second and complete them."""
    engine = durable.configure(url, lease=5.0)
    worker = durable.Worker(engine, poll=0.05, concurrency=2).start()
    n = 0
    started = time.monotonic()
    try:
        while True:
            durable.dispatch(noop, n)
            n += 1
            time.sleep(max(0.0, started + n / rate - time.monotonic()))
    finally:
        worker.stop(grace=2)


def get(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers=AUTH)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


class Tabs:
    """*count* clients, live or polling, fetching *pages* until `stop`."""

    def __init__(self, port: int, count: int, pages: list[str], live: bool) -> None:
        self.port, self.pages = port, pages
        self.requests = 0
        self.versions: list[int] = []
        self.stopping = threading.Event()
        self.streams: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        target = self._live if live else self._poll
        self.threads = [
            threading.Thread(target=target, args=(i,), daemon=True) for i in range(count)
        ]
        for thread in self.threads:
            thread.start()

    def _fetch(self) -> None:
        for page in self.pages:
            status = get(self.port, page)
            assert status == 200, (page, status)
            with self._lock:
                self.requests += 1

    def _live(self, index: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        self.streams.append(connection)
        connection.request("GET", "/api/v1/live", headers=AUTH)
        response = connection.getresponse()
        assert response.status == 200, response.status
        try:
            while not self.stopping.is_set():
                line = response.fp.readline()
                if not line:
                    return
                if line.startswith(b"data:"):
                    if index == 0:
                        self.versions.append(json.loads(line[5:])["version"])
                    self._fetch()
        except OSError:
            return  # closed by stop()

    def _poll(self, index: int) -> None:
        self.stopping.wait(POLL_SECONDS * index / max(len(self.threads), 1))  # spread out
        while not self.stopping.is_set():
            self._fetch()
            self.stopping.wait(POLL_SECONDS)

    def stop(self) -> None:
        self.stopping.set()
        for connection in self.streams:
            connection.close()
        for thread in self.threads:
            thread.join(timeout=10)


def measure(url: str, seconds: float, rate: float) -> dict[str, Any]:
    counter = Counter()
    engine = durable.Engine(url, lease=5.0)
    app = make_app(engine, token=TOKEN)
    server = serve(app, port=0, max_connections=128)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_port
    overview = "/api/v1/overview" if get(port, "/api/v1/overview") == 200 else "/api/v1/queues"
    pages = ["/api/v1/runs?limit=50", overview]
    completer = subprocess.Popen(
        [sys.executable, __file__, "--complete", url, "--rate", str(rate)],
        stdout=subprocess.DEVNULL,
    )
    result: dict[str, Any] = {"rate_runs_per_s": rate, "seconds": seconds, "overview": overview}
    try:
        time.sleep(2.0)  # the completer's worker is up and finishing runs
        for live in (True, False):
            for count in (1, 20):
                mode = "live" if live else "polling"
                print(f"  {mode}, {count} tabs", file=sys.stderr, flush=True)
                tabs = Tabs(port, count, pages, live)
                time.sleep(min(2.0, seconds / 2))  # connected, first fetches done
                statements, requests = counter.count, tabs.requests
                versions = len(tabs.versions)
                began = time.monotonic()
                time.sleep(seconds)
                elapsed = time.monotonic() - began
                key = f"{mode}_{count}_tab{'s' if count > 1 else ''}"
                result[f"statements_per_s_{key}"] = round((counter.count - statements) / elapsed, 1)
                result[f"requests_per_s_{key}"] = round((tabs.requests - requests) / elapsed, 1)
                if live:
                    result[f"versions_per_s_{key}"] = round(
                        (len(tabs.versions) - versions) / elapsed, 2
                    )
                tabs.stop()
                time.sleep(0.5)  # the watch ends with the last stream
    finally:
        completer.terminate()
        completer.wait(timeout=30)
        server.shutdown()
        server.server_close()
        app.close()
        engine.close()
    one, twenty = result["statements_per_s_live_1_tab"], result["statements_per_s_live_20_tabs"]
    result["ratio_20_to_1"] = round(twenty / one, 2) if one else None
    # "the same": within 25 % or two statements a second (the versions seen vary a little)
    result["meets_target"] = twenty <= max(one * 1.25, one + 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--quick", action="store_true", help="3 s per case: a smoke test")
    parser.add_argument("--tmpdir", help="where SQLite files go: a real disk, not tmpfs")
    parser.add_argument("--rate", type=float, default=5.0, help="runs completed a second")
    parser.add_argument("--complete", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.complete:
        complete_runs(args.complete, args.rate)
        return
    seconds = 3.0 if args.quick else 20.0
    for backend in args.backends.split(","):
        if backend == "sqlite":
            folder = tempfile.mkdtemp(dir=args.tmpdir)
            url, name = f"sqlite:///{Path(folder) / 'live.db'}", "sqlite"
        else:
            base = os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
            url, name = fresh_schema(base), "postgresql"
        print(f"{name}: {seconds:.0f} s per case", file=sys.stderr, flush=True)
        print(json.dumps({"backend": name, **measure(url, seconds, args.rate)}), flush=True)
        if backend == "postgres":
            drop_schema(base, url)


if __name__ == "__main__":
    main()
