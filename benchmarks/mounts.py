"""The dashboard over ASGI, three ways: ``python benchmarks/mounts.py [--quick]``.

Which bridge should put the WSGI dashboard into Starlette and FastAPI? Each of three is
served by its own uvicorn process (benchmarks/_mounts_app.py), mounted at /durable in a
Starlette app, over one SQLite database of 200 queued runs:

* native: `durable.web.asgi_app`, the thin adapter in durable.web._asgi;
* a2wsgi: a2wsgi's WSGIMiddleware, the adapter Starlette recommends;
* starlette: Starlette's own WSGIMiddleware (deprecated).

Two requests, both with the bearer token: the page (``GET /durable/``, index.html
from the package) and an API call (``GET /durable/api/v1/runs?limit=20``, a database
read). For each: latency of sequential requests on one keep-alive connection (p50,
p95, in ms), and requests/s with 4 client threads. The three are measured in turns
(native, a2wsgi, starlette, then again in another order...) so that the machine's
drift falls on all alike; each number is the median over the rounds.

One JSON line on stdout: per adapter and request, the numbers; and "fastest_*", the
adapter with the best median for each. Progress on stderr.
"""

from __future__ import annotations

import sys

# Python puts a script's directory first on sys.path: take it off before importing.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import json
import random
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import durable

HERE = Path(__file__).resolve().parent
TOKEN = "bench"
ADAPTERS = ("native", "a2wsgi", "starlette")
PATHS = {"page": "/durable/", "api": "/durable/api/v1/runs?limit=20"}
#: rounds, sequential requests per round, requests per client thread per round
SIZES = {"full": (5, 300, 150), "quick": (1, 10, 5)}
THREADS = 4


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@durable.workflow(name="bench.mounts.noop")
def noop(i: int) -> int:
    return i


class Connection:
    """A keep-alive HTTP/1.1 connection that sends GETs and reads whole answers.

    Not http.client: against uvicorn its responses (headers and body written apart)
    met the client's delayed ACK, and every request took 40 ms whatever the adapter.
    """

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def get(self, path: str) -> None:
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        while b"\r\n\r\n" not in self.buffer:
            self._receive()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status = head.split(b" ", 2)[1]
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")[1:]
            if line.lower().startswith(b"content-length:")
        )
        while len(self.buffer) < length:
            self._receive()
        self.buffer = self.buffer[length:]
        if status != b"200":
            raise SystemExit(f"GET {path} answered {status.decode()}")

    def _receive(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise SystemExit("the server closed the connection")
        self.buffer += chunk
        if hasattr(socket, "TCP_QUICKACK"):  # Linux: acknowledge at once, every time
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)

    def close(self) -> None:
        self.sock.close()


def latencies(port: int, path: str, count: int) -> list[float]:
    """Milliseconds of *count* sequential GETs on one keep-alive connection."""
    connection = Connection(port)
    connection.get(path)  # warm: the first answer of a connection
    out = []
    for _ in range(count):
        start = time.perf_counter()
        connection.get(path)
        out.append((time.perf_counter() - start) * 1000)
    connection.close()
    return out


def throughput(port: int, path: str, each: int) -> float:
    """Requests/s of THREADS clients, each sending *each* GETs on its own connection."""
    barrier = threading.Barrier(THREADS + 1)

    def client() -> None:
        connection = Connection(port)
        connection.get(path)
        barrier.wait()
        for _ in range(each):
            connection.get(path)
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    return THREADS * each / (time.perf_counter() - start)


def start_server(name: str, url: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, str(HERE / "_mounts_app.py"), name, url, TOKEN],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.strip().isdigit():
        process.kill()
        raise SystemExit(f"the {name} server did not start")
    return process, int(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a few requests: a smoke test")
    parser.add_argument("--tmpdir", default=None, help="where the SQLite file goes")
    parser.add_argument("--rounds", type=int, default=None, help="turns of the three")
    args = parser.parse_args()
    rounds, sequential, each = SIZES["quick" if args.quick else "full"]
    rounds = args.rounds or rounds
    directory = Path(args.tmpdir or tempfile.mkdtemp(prefix="durable-mounts-"))
    url = f"sqlite:///{directory / 'mounts.db'}"
    engine = durable.configure(url)
    for i in range(200):  # queued runs: the API call reads a page of them
        durable.dispatch(noop, i)
    engine.close()
    servers = {name: start_server(name, url) for name in ADAPTERS}
    samples: dict[str, dict[str, dict[str, list[float]]]] = {
        name: {kind: {"p50": [], "p95": [], "rps": []} for kind in PATHS} for name in ADAPTERS
    }
    try:
        order = list(ADAPTERS)
        for round_ in range(rounds):
            random.Random(round_).shuffle(order)
            for name in order:
                port = servers[name][1]
                for kind, path in PATHS.items():
                    ms = sorted(latencies(port, path, sequential))
                    samples[name][kind]["p50"].append(statistics.median(ms))
                    samples[name][kind]["p95"].append(ms[max(0, int(len(ms) * 0.95) - 1)])
                    samples[name][kind]["rps"].append(throughput(port, path, each))
            log(f"round {round_ + 1}/{rounds} done")
    finally:
        for process, _ in servers.values():
            process.terminate()
        for process, _ in servers.values():
            process.wait(timeout=10)
    result: dict[str, Any] = {"benchmark": "mounts", "rounds": rounds, "threads": THREADS}
    for name in ADAPTERS:
        result[name] = {
            kind: {
                "ms_p50": round(statistics.median(values["p50"]), 3),
                "ms_p95": round(statistics.median(values["p95"]), 3),
                "requests_per_s": round(statistics.median(values["rps"]), 1),
            }
            for kind, values in samples[name].items()
        }
    for kind in PATHS:
        result[f"fastest_{kind}"] = max(ADAPTERS, key=lambda n: result[n][kind]["requests_per_s"])
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
