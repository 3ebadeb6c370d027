"""Slow and idle clients (slowloris) against `serve`: connections that never finish
their request are dropped after the request timeout, connections beyond the cap are
answered 503 at once, and the handler threads stay bounded by the cap."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from durable.web import make_app, serve
from durable.web._server import ThreadingServer
from tests.web.test_ui_command import Served, fetch

TOKEN = "slow-token"
CAP = 4
PARTIAL = b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ThreadingServer]:
    app = make_app(f"sqlite:///{tmp_path / 'd.db'}", token=TOKEN)
    server = serve(app, port=0, request_timeout=0.5, max_connections=CAP)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        app.close()


def _until(condition: object, what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _health(port: int) -> int:
    status, _, body = fetch(
        port, "GET", "/api/v1/health", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    if status == 200:
        assert json.loads(body) == {"ok": True}
    return status


def _answer(connection: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    connection.settimeout(15)
    chunks = []
    try:
        while chunk := connection.recv(4096):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


def test_idle_connections_beyond_the_cap_get_503_and_threads_stay_bounded(
    server: ThreadingServer,
) -> None:
    port = server.server_port
    before = threading.active_count()
    hanging = []
    for _ in range(40):
        connection = socket.create_connection(("127.0.0.1", port))
        connection.sendall(PARTIAL)
        hanging.append(connection)
    try:
        _until(lambda: server.accepted >= 40, "the server to accept every connection")
        # Never more handler threads than the cap, however many connections wait.
        assert threading.active_count() <= before + CAP
        assert server.active <= CAP
        answers = [_answer(connection) for connection in hanging]
    finally:
        for connection in hanging:
            connection.close()
    busy = [answer for answer in answers if answer.startswith(b"HTTP/1.0 503")]
    dropped = [answer for answer in answers if answer == b""]
    # The first CAP waited until the timeout dropped them; the rest were refused at once.
    assert len(busy) == 40 - CAP and len(dropped) == CAP, answers
    assert b"Retry-After" in busy[0] and b"too many connections" in busy[0].lower()
    _until(lambda: server.active == 0, "the dropped connections' threads to end")
    assert _health(port) == 200


def test_a_client_dripping_a_request_is_dropped_at_the_deadline(
    server: ThreadingServer,
) -> None:
    """One byte every 20 ms keeps any per-read timeout alive; the deadline is for the
    whole request, so the server hangs up long before the drip would end (10 s)."""
    port = server.server_port
    connection = socket.create_connection(("127.0.0.1", port))
    sent = 0
    try:
        for _ in range(500):
            try:
                connection.sendall(b"X")
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 1
            time.sleep(0.02)
            if _closed(connection):
                break
    finally:
        connection.close()
    assert sent < 500, "the server kept the dripping connection open"
    assert _health(port) == 200


def _closed(connection: socket.socket) -> bool:
    connection.setblocking(False)
    try:
        return connection.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        connection.setblocking(True)


def test_a_slow_body_is_dropped_too(server: ThreadingServer) -> None:
    """Headers done, the body promised but never sent: dropped at the deadline."""
    with socket.create_connection(("127.0.0.1", server.server_port)) as connection:
        connection.sendall(
            b"POST /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: 100\r\n\r\n{"
        )
        assert _answer(connection) == b""
    assert _health(server.server_port) == 200


def test_a_normal_request_is_not_cut(server: ThreadingServer) -> None:
    """The deadline covers reading the request: a complete one is answered in full."""
    for _ in range(3):
        assert _health(server.server_port) == 200
    status, _, body = fetch(
        server.server_port,
        "POST",
        "/api/v1/runs/none/cancel",
        headers={"Authorization": f"Bearer {TOKEN}"},
        body={"actor": "x" * 1000},
    )
    assert status == 400 and b"'actor'" in body


def test_durable_ui_takes_the_limits_as_options(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ui.db'}"
    durable.Engine(url).close()
    served = Served("--db", url, "--request-timeout", "0.5", "--max-connections", "2")
    try:
        waiting = [socket.create_connection(("127.0.0.1", served.port)) for _ in range(3)]
        for connection in waiting:
            connection.sendall(PARTIAL)
        answers = sorted(_answer(connection) for connection in waiting)
        for connection in waiting:
            connection.close()
        assert answers[:2] == [b"", b""] and answers[2].startswith(b"HTTP/1.0 503"), answers
        bearer = {"Authorization": f"Bearer {served.token}"}
        # The slots free as the server's threads see the connections close: soon, not
        # at once (under load, a request right after the close may still get 503).
        statuses: list[int] = []

        def answered() -> bool:
            statuses.append(fetch(served.port, "GET", "/api/v1/health", headers=bearer)[0])
            return statuses[-1] == 200

        _until(answered, "a normal request answered once the stuck ones are gone")
        assert set(statuses) <= {200, 503}, statuses
    finally:
        code, stderr = served.stop()
    assert code == 0, stderr


@pytest.mark.parametrize(
    ("option", "value"), [("--request-timeout", "0"), ("--max-connections", "0")]
)
def test_bad_limits_are_usage_errors(tmp_path: Path, option: str, value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "durable", "ui", "--port", "0", option, value],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and option in done.stderr, done.stderr
