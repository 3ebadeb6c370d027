"""The threaded HTTP server `durable ui` runs: `serve`, bounded against slow clients.

A thread per connection, so one slow request blocks no other; but a client that opens
connections and never finishes a request (slowloris) must not hold threads forever.
So each connection has a deadline (`request_timeout`) for sending its whole request,
line, headers and body: a watchdog thread shuts the socket down when it passes, however
slowly the bytes drip in. The request is read in full before the app runs, so the
deadline never cuts an answer the app is still working on. And at most
`max_connections` are handled at once: one more is answered 503 at once, from the
accepting thread without blocking, and closed.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import socket
import socketserver
import threading
import time
from io import BytesIO
from typing import IO, Any, cast
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server

from ._app import WebApp
from ._http import MAX_BODY
from ._security import redact

log = logging.getLogger("durable.web")

#: Seconds a client has to send a whole request before its connection is dropped.
REQUEST_TIMEOUT = 10.0
#: Connections handled at once; one more is answered 503 and closed.
MAX_CONNECTIONS = 64

_BUSY_TEXT = b"Too many connections at once; try again in a moment.\n"
_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Retry-After: 1\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_BUSY_TEXT), _BUSY_TEXT)
)


class Watchdog:
    """Shuts down sockets whose deadline passed before they were disarmed: one thread
    for every connection, sleeping until the earliest deadline."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._deadlines: list[tuple[float, int, socket.socket]] = []
        self._armed: set[int] = set()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="durable-ui-watchdog", daemon=True)
        self._thread.start()

    def arm(self, connection: socket.socket, seconds: float) -> None:
        """Shut *connection* down in *seconds* unless `disarm` comes first."""
        with self._lock:
            self._armed.add(id(connection))
            heapq.heappush(
                self._deadlines, (time.monotonic() + seconds, id(connection), connection)
            )
            self._lock.notify()

    def disarm(self, connection: socket.socket) -> bool:
        """*connection* is done reading its request (or closed): leave it be. False if
        it was too late: the deadline passed and the socket is shut down."""
        with self._lock:
            armed = id(connection) in self._armed
            self._armed.discard(id(connection))
            return armed

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        with self._lock:
            while not self._stopped:
                now = time.monotonic()
                while self._deadlines and (
                    self._deadlines[0][0] <= now or self._deadlines[0][1] not in self._armed
                ):
                    _, key, connection = heapq.heappop(self._deadlines)
                    if key in self._armed:
                        self._armed.discard(key)
                        _shut(connection)
                wait = self._deadlines[0][0] - now if self._deadlines else None
                self._lock.wait(wait)


def _shut(connection: socket.socket) -> None:
    """End *connection*: a blocked read in its thread returns at once."""
    with contextlib.suppress(OSError):  # already closed
        connection.shutdown(socket.SHUT_RDWR)


class ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    """wsgiref's server with a thread per connection, a deadline per request and a cap
    on connections handled at once (see the module's docstring)."""

    daemon_threads = True  # a hung request must not keep the process from exiting
    allow_reuse_address = True
    request_queue_size = 128  # the listen backlog: bursts wait in the kernel
    request_timeout = REQUEST_TIMEOUT
    max_connections = MAX_CONNECTIONS

    def server_activate(self) -> None:
        super().server_activate()
        self.watchdog = Watchdog()
        self._count = threading.Lock()
        #: connections accepted, and being handled now (both for tests and metrics).
        self.accepted = 0
        self.active = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count:
            self.accepted += 1
            busy = self.active >= self.max_connections
            if not busy:
                self.active += 1
        if busy:
            _refuse(request)
            self.shutdown_request(request)
            return
        self.watchdog.arm(request, self.request_timeout)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def _done(self, request: Any) -> None:
        self.watchdog.disarm(request)
        with self._count:
            self.active -= 1

    def server_close(self) -> None:
        super().server_close()
        self.watchdog.stop()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A browser that navigates away mid-response resets the connection, and the
        # watchdog ends slow ones: routine, not worth a traceback on stderr.
        log.debug("connection from %s failed", client_address, exc_info=True)


def _refuse(request: socket.socket) -> None:
    """503 without blocking the accepting thread: the answer fits the socket buffer.
    What the client already sent is read and dropped, so that closing does not reset
    the connection before the answer is read."""
    try:
        request.setblocking(False)
        request.send(_BUSY)
        request.recv(65536)
    except OSError:
        pass


class _ThreadingServer6(ThreadingServer):
    address_family = socket.AF_INET6


class QuietHandler(WSGIRequestHandler):
    """Reads the whole request (under the watchdog's deadline) before the app runs;
    logs requests to the ``durable.web`` logger at DEBUG instead of to stderr, with the
    login token redacted (`redact`); passes the raw request target on as
    ``REQUEST_URI`` (routing needs the undecoded path: `durable.web._http.Request`)."""

    server: ThreadingServer

    def handle(self) -> None:
        # WSGIRequestHandler.handle, with the body read before the deadline is lifted.
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline = self.request_version = self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():  # an error was sent
            return
        body = self._body()
        if not self.server.watchdog.disarm(self.connection) or body is None:
            return  # the deadline passed (what was read may be cut short), or EOF
        app = self.server.get_app()
        assert app is not None
        output = cast(IO[bytes], self.wfile)
        handler = ServerHandler(
            body, output, self.get_stderr(), self.get_environ(), multithread=True
        )
        handler.request_handler = self  # type: ignore[attr-defined]  # wsgiref's backpointer
        handler.run(app)

    def _body(self) -> BytesIO | None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0  # the app answers 400 for it
        if length <= 0 or length > MAX_BODY:
            return BytesIO()  # the app answers 413 for an oversized one, unread
        data = self.rfile.read(length)
        return BytesIO(data) if len(data) == length else None

    def get_environ(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environ()
        environ["REQUEST_URI"] = self.path
        return environ

    def log_message(self, format: str, *args: Any) -> None:
        # The request line may hold the login token (?token=...): never log it.
        log.debug("%s %s", self.address_string(), redact(format % args))


def serve(
    app: WebApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    request_timeout: float = REQUEST_TIMEOUT,
    max_connections: int = MAX_CONNECTIONS,
) -> ThreadingServer:
    """A threaded HTTP server for *app*, bound but not started.

    Start it with ``server.serve_forever()`` (in a thread if you like); stop it with
    ``server.shutdown()`` then ``server.server_close()``. Port 0 picks a free port:
    read it from ``server.server_port``. *host* itself is added to the allowed Host
    names, unless it is a wildcard address (0.0.0.0, ::) that names no host.

    Args:
        request_timeout: seconds a client has to send its whole request; a connection
            still incomplete then is dropped.
        max_connections: connections handled at once; more are answered 503 at once.
    """
    if request_timeout <= 0 or max_connections < 1:
        raise ValueError(
            "request_timeout must be above 0 seconds and max_connections at least 1, not "
            f"{request_timeout!r} and {max_connections!r}."
        )
    if host not in ("0.0.0.0", "::", ""):
        app.allow_host(host)
    server_class = _ThreadingServer6 if ":" in host else ThreadingServer
    server = make_server(host, port, app, server_class=server_class, handler_class=QuietHandler)
    assert isinstance(server, ThreadingServer)
    server.request_timeout = request_timeout
    server.max_connections = max_connections
    return server
