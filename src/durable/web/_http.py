"""Requests and responses over a WSGI environ, and the error that becomes problem+json.

Kept apart from routing and security so both can build responses without importing
each other.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, quote, unquote_to_bytes

#: The largest request body read, in bytes. Bodies are small JSON objects; a bigger
#: one is a mistake or an attack, not a workflow argument worth a server's memory.
MAX_BODY = 1 << 20

#: What `Request.path` escapes inside a segment: a slash and the percent sign.
_ESCAPED = re.compile("%2F|%25")


class HTTPError(Exception):
    """Stops a request with an HTTP error status; the app answers with problem+json.

    Args:
        status: the HTTP status code.
        detail: a full sentence saying what is wrong and what to do.
        headers: extra response headers (``Allow``, ``WWW-Authenticate``).
    """

    def __init__(self, status: int, detail: str, *, headers: Iterable[tuple[str, str]] = ()):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = list(headers)


class Request:
    """The parts of a WSGI environ the app reads, decoded once."""

    def __init__(self, environ: dict[str, Any]) -> None:
        self.environ = environ
        self.method: str = environ.get("REQUEST_METHOD", "GET").upper()
        #: The path under the mount, decoded, except that a "/" or "%" inside a segment
        #: stays "%2F" / "%25": routes split on real slashes only (`path_param` decodes).
        self.path = _routed_path(environ)
        self.script_name = _utf8(environ.get("SCRIPT_NAME", "")).rstrip("/")
        self.query: dict[str, list[str]] = parse_qs(
            environ.get("QUERY_STRING", ""), keep_blank_values=True
        )
        self.scheme: str = environ.get("wsgi.url_scheme", "http")

    def header(self, name: str) -> str | None:
        """The value of request header *name* (case-insensitive), or None."""
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            value = self.environ.get(key)
        else:
            value = self.environ.get(f"HTTP_{key}")
        return value if value else None

    def arg(self, name: str) -> str | None:
        """The last value of query parameter *name*, or None when absent or empty."""
        values = self.query.get(name)
        return values[-1] if values and values[-1] != "" else None

    def args(self, name: str) -> list[str]:
        """Every value of query parameter *name*, comma lists split, blanks dropped."""
        return [
            part.strip()
            for value in self.query.get(name, ())
            for part in value.split(",")
            if part.strip()
        ]

    def url(self, path: str) -> str:
        """The absolute path of *path* (relative to the app's root) under the mount."""
        return self.script_name + quote(path, safe="/?&=%:@")


@dataclass
class Response:
    """A complete response: status, headers and body bytes."""

    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    #: a body sent piece by piece instead (an event stream, `_streams.py`), with no
    #: Content-Length; the server calls its ``close`` when done.
    chunks: Iterable[bytes] | None = None

    @property
    def status_line(self) -> str:
        """``"200 OK"``: the form WSGI's start_response takes."""
        return f"{self.status} {HTTPStatus(self.status).phrase}"

    @classmethod
    def json(cls, data: Any, status: int = 200) -> Response:
        """*data* serialized as compact UTF-8 JSON."""
        return cls(status, [("Content-Type", "application/json")], dumps(data))

    @classmethod
    def problem(
        cls,
        status: int,
        detail: str,
        headers: Iterable[tuple[str, str]] = (),
        errors: list[dict[str, Any]] | None = None,
    ) -> Response:
        """An RFC 9457 problem document: type, title, status and detail; with *errors*,
        the fields at fault (``[{"loc": [...], "msg": ...}]``: a typed event's payload)."""
        body: dict[str, Any] = {
            "type": "about:blank",
            "title": HTTPStatus(status).phrase,
            "status": status,
            "detail": detail,
        }
        if errors is not None:
            body["errors"] = errors
        return cls(status, [("Content-Type", "application/problem+json"), *headers], dumps(body))

    @classmethod
    def html(cls, status: int, text: str) -> Response:
        """A small HTML page."""
        return cls(status, [("Content-Type", "text/html; charset=utf-8")], text.encode())

    @classmethod
    def redirect(cls, location: str, status: int = 303) -> Response:
        """A redirect to *location* (an absolute path)."""
        return cls(status, [("Location", location)])

    def header(self, name: str) -> str | None:
        """The value of response header *name*, or None."""
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


def dumps(data: Any) -> bytes:
    """JSON bytes; non-ASCII text stays as UTF-8. A lone surrogate (stored by a Python
    caller; the API refuses them) is written as its ``\\uXXXX`` escape, still valid
    JSON, instead of failing the whole answer."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "backslashreplace")


def etag_of(body: bytes) -> str:
    """A strong entity tag: a hash of the body."""
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def not_modified(request: Request, response: Response) -> Response:
    """Add an ETag to *response*; answer 304 instead if the client already has it."""
    tag = etag_of(response.body)
    response.headers.append(("ETag", tag))
    if unchanged(request, tag):
        return Response(304, [("ETag", tag)])
    return response


def unchanged(request: Request, tag: str) -> bool:
    """Whether the client's ``If-None-Match`` names *tag* (or ``*``)."""
    wanted = request.header("If-None-Match")
    if wanted is None:
        return False
    tags = {t.strip().removeprefix("W/") for t in wanted.split(",")}
    return tag in tags or "*" in tags


def path_param(value: str) -> str:
    """A value matched in `Request.path`, with its escaped "/" and "%" decoded."""
    return _ESCAPED.sub(lambda match: "/" if match[0] == "%2F" else "%", value)


def _routed_path(environ: dict[str, Any]) -> str:
    """`Request.path` from the raw request target (``RAW_URI`` or ``REQUEST_URI``, which
    servers pass on undecoded), so that an id holding "%2F" stays one segment. Falls
    back to PATH_INFO, where "%2F" is already a slash, when the server passes neither or
    the raw target does not decode to SCRIPT_NAME + PATH_INFO (a middleware rewrote it).
    """
    script = environ.get("SCRIPT_NAME", "").encode("latin-1", "replace")
    path_info = environ.get("PATH_INFO", "")
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or ""
    raw = raw.partition("?")[0].partition("#")[0]
    if raw.startswith("/"):
        segments = [unquote_to_bytes(part) for part in raw[1:].split("/")]
        whole = path_info.encode("latin-1", "replace")
        if b"/" + b"/".join(segments) == script + whole:
            # Drop the segments of the mount point; what is left is the app's path.
            taken, mount = 0, b""
            while taken < len(segments) and len(mount) < len(script):
                mount += b"/" + segments[taken]
                taken += 1
            if mount == script:
                rest = [_utf8_bytes(part) for part in segments[taken:]]
                escaped = [part.replace("%", "%25").replace("/", "%2F") for part in rest]
                return ("/" if rest else "") + "/".join(escaped)
    return _utf8(path_info).replace("%", "%25")


def _utf8_bytes(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _utf8(text: str) -> str:
    try:
        return text.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return text
