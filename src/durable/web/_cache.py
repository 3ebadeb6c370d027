"""Answers shared between clients while live updates run: one read per change, not per tab.

When a change moves the `LiveHub`'s version, every open tab asks for its page again at
the same moment. `ResponseCache` answers the same GET (method, path and query) once per
version: the first request computes it, those arriving meanwhile wait for that answer,
and later ones get it from memory until the version moves again, when every answer of
the old version is dropped at once, so no change is ever hidden behind the cache.

Only the app decides what may be shared: a GET under ``api/v1`` whose answer is the
same for every principal (`Route.shared`), asked after the request was authorised, and
only a complete 200 answer is kept. ETags still work: the answer is computed without
the client's ``If-None-Match`` and each client's own is compared with it (304).
Nothing is shared while the hub is not watching (no live client): a version that does
not move could hide changes. The memory is bounded by `MAX_ENTRIES` answers and
`MAX_BYTES` bytes of bodies, the least recently used dropped first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from ._http import Request, Response, unchanged
from ._live import LiveHub

#: Answers kept at most (of the current version).
MAX_ENTRIES = 256
#: Bytes of bodies kept at most; a bigger answer is not kept.
MAX_BYTES = 32 << 20

Key = tuple[str, str, str]


class _Flight:
    """An answer being computed; requests for the same key wait for it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.response: Response | None = None
        self.error: BaseException | None = None


class ResponseCache:
    """Shared answers of the current version of *hub*."""

    def __init__(
        self, hub: LiveHub, *, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES
    ) -> None:
        self._hub = hub
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._version = -1
        self._entries: OrderedDict[Key, Response] = OrderedDict()
        self._flights: dict[Key, _Flight] = {}
        self._bytes = 0
        hub.subscribe(self._moved)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """Bytes of the bodies kept."""
        return self._bytes

    def answer(self, request: Request, compute: Callable[[Request], Response]) -> Response:
        """The answer to *request*: shared if one is kept for the current version, else
        computed by *compute* (once, however many ask at the same time)."""
        if not self._hub.watching:
            return compute(request)
        version = self._hub.version
        key = (request.method if request.method != "HEAD" else "GET", request.path, _query(request))
        owner = False
        with self._lock:
            if version != self._version:
                self._drop(version)
            kept = self._entries.get(key)
            if kept is not None:
                self._entries.move_to_end(key)
                return _conditional(request, kept)
            flight = self._flights.get(key)
            if flight is None:
                flight = self._flights[key] = _Flight()
                owner = True
        if not owner:
            flight.done.wait()
            if flight.error is not None:
                raise flight.error
            assert flight.response is not None
            return _conditional(request, flight.response)
        try:
            response = compute(_unconditional(request))
        except BaseException as error:
            flight.error = error
            raise
        finally:
            with self._lock:
                if self._flights.get(key) is flight:
                    del self._flights[key]
            flight.done.set()
        flight.response = response
        self._keep(version, key, response)
        return _conditional(request, response)

    def _keep(self, version: int, key: Key, response: Response) -> None:
        if response.status != 200 or response.chunks is not None:
            return
        size = len(response.body)
        if size > self._max_bytes:
            return
        with self._lock:
            if version != self._version or key in self._entries:
                return  # the version moved meanwhile: this answer may be stale already
            self._entries[key] = response
            self._bytes += size
            while len(self._entries) > self._max_entries or self._bytes > self._max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= len(dropped.body)

    def _moved(self, version: int) -> None:
        with self._lock:
            if version > self._version:
                self._drop(version)

    def _drop(self, version: int) -> None:
        """Forget every answer (and flight) of older versions; under the lock."""
        self._version = version
        self._entries.clear()
        self._flights.clear()
        self._bytes = 0


def _query(request: Request) -> str:
    return str(request.environ.get("QUERY_STRING", ""))


def _unconditional(request: Request) -> Request:
    """*request* without ``If-None-Match``: the answer kept must be the whole one."""
    environ = dict(request.environ)
    environ.pop("HTTP_IF_NONE_MATCH", None)
    return Request(environ)


def _conditional(request: Request, response: Response) -> Response:
    """304 if *response* has the ETag the client sent, else *response* itself."""
    tag = response.header("ETag")
    if tag is not None and response.status == 200 and unchanged(request, tag):
        return Response(304, [("ETag", tag)])
    return response
