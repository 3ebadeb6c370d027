"""`durable ui` as a user runs it, and the threaded server behind it, over real sockets."""

from __future__ import annotations

import http.client
import json
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
from durable.web import make_app, serve
from tests.web.ui_app import greet

ROOT = Path(__file__).resolve().parents[2]
URL_LINE = re.compile(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)")


def fetch(
    port: int, method: str, path: str, *, headers: dict[str, str] | None = None, body: Any = None
) -> tuple[int, dict[str, str], bytes]:
    """One request to 127.0.0.1:*port*; redirects are not followed."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        data = None if body is None else json.dumps(body).encode()
        every = {**(headers or {})}
        if data is not None:
            every["Content-Type"] = "application/json"
        connection.request(method, path, body=data, headers=every)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.fixture
def database(tmp_path: Path) -> str:
    """A SQLite database holding one completed run of ui_app.greet."""
    url = f"sqlite:///{tmp_path / 'ui.db'}"
    with durable.Engine(url) as engine:
        run = engine.execute_call(greet.bind("db"), run_id="greeted")
        assert run == "hello db"
    return url


class Served:
    """A `durable ui` subprocess and the port and token it printed."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "durable", "ui", *args, "--port", "0"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        assert self.process.stdout is not None
        stdout = self.process.stdout
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        try:
            self.first_line = lines.get(timeout=30)
        except queue.Empty:
            self.process.kill()
            raise AssertionError("durable ui printed no URL within 30 s") from None
        match = URL_LINE.fullmatch(self.first_line.strip())
        assert match, f"not a URL: {self.first_line!r}; stderr: {self.stop()[1]}"
        self.port, self.token = int(match[1]), match[2]

    def stop(self) -> tuple[int, str]:
        """Ctrl-C; the exit code and what went to stderr."""
        self.process.send_signal(signal.SIGINT)
        _, stderr = self.process.communicate(timeout=30)
        return self.process.returncode, stderr


@pytest.fixture
def served(database: str) -> Iterator[Served]:
    server = Served("tests.web.ui_app", "--db", database)
    yield server
    if server.process.poll() is None:
        server.process.kill()
        server.process.communicate()


def test_ui_prints_a_working_url_and_stops_on_ctrl_c(served: Served) -> None:
    """The printed URL names the real port and a token that opens the API and the page;
    a workflow of an imported MODULE can be started; Ctrl-C exits 0, without a log line
    per request."""
    bearer = {"Authorization": f"Bearer {served.token}"}
    status, _, body = fetch(served.port, "GET", "/api/v1/runs/greeted", headers=bearer)
    assert status == 200 and json.loads(body)["output"] == "hello db"
    status, _, body = fetch(
        served.port, "POST", "/api/v1/runs", headers=bearer, body={"workflow": greet.name}
    )
    assert status == 400 and "arguments" in json.loads(body)["detail"]
    status, _, _ = fetch(
        served.port,
        "POST",
        "/api/v1/runs",
        headers=bearer,
        body={"workflow": greet.name, "args": ["ui"]},
    )
    assert status == 201
    status, headers, _ = fetch(served.port, "GET", f"/?token={served.token}")
    assert status == 303 and re.match(r"durable_session_[0-9a-f]{12}=", headers["Set-Cookie"])
    assert fetch(served.port, "GET", "/api/v1/runs")[0] == 401
    code, stderr = served.stop()
    assert code == 0, stderr
    assert "GET /api" not in stderr and "POST" not in stderr


def test_ui_with_a_fixed_token_and_read_only(database: str) -> None:
    """--token is the printed token; --read-only refuses POSTs but serves GETs."""
    served = Served("--db", database, "--token", "fixed-token", "--read-only")
    try:
        assert served.token == "fixed-token"
        bearer = {"Authorization": "Bearer fixed-token"}
        assert fetch(served.port, "GET", "/api/v1/runs", headers=bearer)[0] == 200
        status, _, body = fetch(
            served.port, "POST", "/api/v1/runs/greeted/cancel", headers=bearer, body={}
        )
        assert status == 403 and "read-only" in json.loads(body)["detail"]
    finally:
        assert served.stop()[0] == 0


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--host", "0.0.0.0"], 2, "--token"),
        (["--host", "192.0.2.1"], 2, "--token"),
        (["--db", "sqlite:///no/such/file.db"], 1, "no database file"),
        (["no_such_module_here"], 2, "cannot import"),
    ],
)
def test_ui_refuses_unsafe_or_broken_starts(
    database: str, args: list[str], code: int, message: str
) -> None:
    """A non-loopback address without an explicit token, a missing database file or a
    module that does not import: a clear message and a non-zero exit, nothing served."""
    if "--db" not in args:
        args = [*args, "--db", database]
    done = subprocess.run(
        [sys.executable, "-m", "durable", "ui", *args, "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == code and message in done.stderr, done.stderr
    assert done.stdout == ""


def test_the_server_answers_while_another_request_hangs(database: str) -> None:
    """serve() handles each request in its own thread: a client that sends half a
    request does not stall the next one."""
    app = make_app(database, token="t")
    server = serve(app, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with socket.create_connection(("127.0.0.1", server.server_port)) as hanging:
            hanging.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            status, headers, body = fetch(
                server.server_port, "GET", "/api/v1/health", headers={"Authorization": "Bearer t"}
            )
            assert (status, json.loads(body)) == (200, {"ok": True})
            assert headers["Cache-Control"] == "no-store"
    finally:
        server.shutdown()
        server.server_close()
        app.close()
