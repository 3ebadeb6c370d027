"""`durable ui --log-level DEBUG` logs every request line: the login token must not be
in it, whether in ``?token=`` (however encoded) or an ``Authorization`` header."""

from __future__ import annotations

import logging
import socket
import threading
from pathlib import Path

import pytest

import durable
from durable.web import make_app, serve
from tests.web.test_ui_command import Served, fetch

SECRET = "s3cret-login-token-4242"


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'log.db'}"
    durable.Engine(url).close()  # creates the file, which durable ui insists on
    assert (tmp_path / "log.db").exists()
    return url


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(data)
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_the_request_log_redacts_the_token(database: str, caplog: pytest.LogCaptureFixture) -> None:
    app = make_app(database, token=SECRET)
    server = serve(app, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_port
    try:
        with caplog.at_level(logging.DEBUG, logger="durable.web"):
            assert fetch(port, "GET", f"/?token={SECRET}&view=runs")[0] == 303
            assert fetch(port, "GET", f"/?view=x&TOKEN={SECRET}")[0] == 401
            assert fetch(port, "GET", f"/?%74oken={SECRET}")[0] == 303
            assert fetch(port, "GET", f"/?token={SECRET[:8]}%2D{SECRET[9:]}")[0] == 401
            bearer = {"Authorization": f"Bearer {SECRET}"}
            assert fetch(port, "GET", "/api/v1/health", headers=bearer)[0] == 200
            # A malformed request line is logged by the server itself ("Bad request").
            answer = _raw(port, f"GET /?token={SECRET} junk HTTP/1.1\r\n\r\n".encode())
            assert b"400" in answer
            # An over-long line is refused, and nothing of it is logged either.
            long_line = f"GET /?token={SECRET}&pad={'x' * 70000} HTTP/1.1\r\n\r\n"
            assert b"414" in _raw(port, long_line.encode())
    finally:
        server.shutdown()
        server.server_close()
        app.close()
    logged = [record.getMessage() for record in caplog.records]
    assert any("/?token=[redacted]&view=runs" in line for line in logged), logged
    assert any("/api/v1/health" in line for line in logged), logged
    assert any("400" in line for line in logged), logged
    for line in logged:
        assert SECRET not in line and SECRET[9:] not in line, line


def test_durable_ui_at_debug_keeps_the_token_out_of_stderr(database: str) -> None:
    served = Served("--db", database, "--log-level", "DEBUG")
    try:
        assert fetch(served.port, "GET", f"/?token={served.token}")[0] == 303
        bearer = {"Authorization": f"Bearer {served.token}"}
        assert fetch(served.port, "GET", "/api/v1/runs", headers=bearer)[0] == 200
    finally:
        code, stderr = served.stop()
    assert code == 0
    assert "GET /?token=[redacted]" in stderr and "GET /api/v1/runs" in stderr, stderr
    assert served.token not in stderr, stderr
