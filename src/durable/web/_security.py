"""Who may talk to the app, and how: token login, session cookie, CSRF, Origin, Host.

The model is Jupyter's. `durable ui` prints a URL holding a random token. Opening it
swaps the token for a session cookie (HttpOnly, SameSite=Strict) and redirects to the
same page without the token, so it does not stay in the address bar or history. API
clients send the token as ``Authorization: Bearer``.

A cookie rides along on any request the browser makes, even one a hostile page
triggers, so a POST (or DELETE) with a cookie must also prove it comes from our own
page: an ``X-CSRF-Token`` header (a page on another site cannot read it from
/api/v1/session) and an ``Origin`` equal to our own. A bearer token is never sent
implicitly, so bearer requests skip those checks. Every POST must be
``application/json``: a cross-site HTML form cannot send that type without a CORS
preflight, which we never answer (nor can it send a DELETE at all).

The Host check stops DNS rebinding: a hostile name that resolves to 127.0.0.1 reaches
the server, but with its own name in ``Host``.

Sessions are stateless: the cookie is ``<session id>.<signature>``. Signatures and CSRF
tokens are HMACs under a key derived from the secret and the token, so a new token (a
restarted `durable ui` without ``--token``) ends every old session, and several
processes that share a secret and token accept each other's sessions. The cookie's name
(``durable_session_<12 hex>``) is derived from the same key: a browser sends every
cookie of a host to every port, so two dashboards on one machine must not share one.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import unquote_plus, urlencode

from ._http import HTTPError, Request, Response

#: The session cookie's name is this, then "_" and 12 hex digits derived from the app's
#: key: browsers share cookies between ports of one host, so two dashboards there
#: must not overwrite each other's (`Guard.cookie`).
COOKIE = "durable_session"

#: Host names that always reach this machine (port removed, lower case).
LOOPBACK = frozenset({"localhost", "127.0.0.1", "[::1]"})

#: Headers on every response. No inline script or style, no framing, no sniffing, and
#: no Referer leaking a URL that may still hold the token.
SECURITY_HEADERS = (
    ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
)

_DEFAULT_PORTS = {"http": "80", "https": "443"}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: a bearer-token client or a browser session."""

    #: the actor recorded when a POST names none: "api" or "dashboard".
    actor: str
    #: the cookie's session id; None for bearer requests.
    session: str | None = None


class Guard:
    """Checks every request before a handler sees it.

    Args:
        token: the secret that logs a browser in and authorizes bearer requests.
        secret: the HMAC key for session cookies and CSRF tokens.
        read_only: refuse every POST and DELETE.
        allowed_hosts: extra ``Host`` names to accept besides loopback; ``"*"`` accepts
            any (for an app mounted in a framework that checks hosts itself).
    """

    def __init__(
        self, *, token: str, secret: bytes, read_only: bool, allowed_hosts: tuple[str, ...]
    ) -> None:
        if not token:
            raise ValueError("The token must not be empty: pass token=None to generate one.")
        self.token = token
        self.read_only = read_only
        self._key = hmac.new(secret, b"durable.web\0" + token.encode(), hashlib.sha256).digest()
        #: the session cookie's name: the same for every process sharing the secret
        #: and token (they serve one dashboard), another for any other dashboard.
        self.cookie = f"{COOKIE}_{self._sign(b'cookie-name', '')[:12]}"
        self._hosts = set(LOOPBACK)
        for host in allowed_hosts:
            self.allow_host(host)

    def allow_host(self, host: str) -> None:
        """Accept *host* (a name or address, with or without a port) in ``Host``."""
        self._hosts.add(_bare_host(host))

    def check_host(self, request: Request) -> None:
        """Raises HTTPError 400 unless the ``Host`` header names an allowed host."""
        if "*" in self._hosts:
            return
        host = request.header("Host")
        if host is None or _bare_host(host) not in self._hosts:
            raise HTTPError(
                400,
                f"The Host header {host!r} is not allowed. Open the dashboard through "
                "localhost or 127.0.0.1, or start it with --allow-host NAME "
                "(make_app(allowed_hosts=...)) for the name you use.",
            )

    def login(self, request: Request) -> Response:
        """Swap a right ``?token=`` for a session cookie; redirect to the URL without it."""
        given = request.arg("token") or ""
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return unauthorized_page(wrong_token=True)
        session = secrets.token_urlsafe(24)
        cookie = SimpleCookie()
        cookie[self.cookie] = f"{session}.{self._sign(b'session', session)}"
        morsel = cookie[self.cookie]
        morsel["httponly"] = True
        morsel["samesite"] = "Strict"
        morsel["path"] = request.script_name or "/"
        if request.scheme == "https":
            morsel["secure"] = True
        rest = {k: v for k, v in request.query.items() if k != "token"}
        location = request.url(request.path) + ("?" + urlencode(rest, doseq=True) if rest else "")
        response = Response.redirect(location)
        response.headers.append(("Set-Cookie", morsel.OutputString()))
        return response

    def authenticate(self, request: Request) -> Principal | None:
        """The principal behind a valid bearer token or session cookie, else None."""
        scheme, _, given = (request.header("Authorization") or "").partition(" ")
        # Other schemes are left alone: a proxy's Basic auth in front of the dashboard
        # makes the browser send Authorization with every request, cookie or not.
        if scheme.lower() == "bearer":
            if hmac.compare_digest(given.strip().encode(), self.token.encode()):
                return Principal("api")
            return None  # a wrong token is not rescued by a cookie
        session = self._session(request)
        return None if session is None else Principal("dashboard", session)

    def csrf(self, session: str) -> str:
        """The CSRF token of *session*: what POSTs and DELETEs with that cookie must send."""
        return self._sign(b"csrf", session)

    def check_write(self, request: Request, principal: Principal) -> None:
        """Raises HTTPError (403, 415) unless this POST or DELETE may change anything.

        A DELETE has no body, so no content type: a cross-site form cannot send one,
        and a cross-site script needs a CORS preflight, which we never answer."""
        if self.read_only:
            raise HTTPError(
                403,
                "This dashboard is read-only: it was started with --read-only "
                "(read_only=True), so runs cannot be started, cancelled, paused, resumed, "
                "retried or signalled, nor schedules paused, resumed, triggered or deleted, "
                "nor flow tasks restarted, killed or answered.",
            )
        if principal.session is not None:
            self._check_same_origin(request, principal.session)
        if request.method != "POST":
            return
        content_type = (request.header("Content-Type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise HTTPError(
                415, "POST bodies must be JSON: send the header Content-Type: application/json."
            )

    def _check_same_origin(self, request: Request, session: str) -> None:
        origin = request.header("Origin")
        own = _origin(request.scheme, request.header("Host") or "")
        scheme, sep, host = (origin or "").partition("://")
        if not sep or _origin(scheme, host) != own:
            raise HTTPError(
                403,
                f"A {request.method} with the session cookie must come from this page: its Origin "
                f"({origin!r}) must be {own!r}. Scripts should send Authorization: Bearer "
                "<token> instead of the cookie.",
            )
        if request.header("Sec-Fetch-Site") == "cross-site":
            raise HTTPError(403, f"Cross-site {request.method}s are refused.")
        given = request.header("X-CSRF-Token") or ""
        if not hmac.compare_digest(given.encode(), self.csrf(session).encode()):
            raise HTTPError(
                403,
                "The X-CSRF-Token header is missing or wrong: send the 'csrf' value "
                "of GET api/v1/session with every POST and DELETE (reload the page if it is "
                "stale).",
            )

    def _session(self, request: Request) -> str | None:
        # Parsed by hand: SimpleCookie gives up on the whole header at the first cookie
        # it dislikes, and on localhost every app on every port shares the cookie jar.
        # Several of our cookies (apps mounted at nested paths) may come along.
        for pair in (request.header("Cookie") or "").split(";"):
            name, _, value = pair.strip().partition("=")
            if name != self.cookie:
                continue
            session, _, signature = value.strip('"').partition(".")
            expected = self._sign(b"session", session)
            if hmac.compare_digest(signature.encode(), expected.encode()):
                return session
        return None

    def _sign(self, purpose: bytes, session: str) -> str:
        # One key, separate purposes: a cookie signature is never a valid CSRF token.
        message = purpose + b"\0" + session.encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()


def redact(text: str) -> str:
    """*text* (a request line, a log message) with every secret it may carry replaced by
    ``[redacted]``: the value of a ``token`` query parameter (its name matched however
    it is cased or percent-encoded) and the credentials after ``Bearer`` or ``Basic``."""
    text = _CREDENTIALS.sub(r"\1[redacted]", text)
    return _QUERY_PAIR.sub(_redact_pair, text)


_QUERY_PAIR = re.compile(r"(?<=[?&;])([^=&;\s?]*)=([^&;\s]*)")
_CREDENTIALS = re.compile(r"(?i)\b((?:bearer|basic)\s+)\S+")


def _redact_pair(match: re.Match[str]) -> str:
    if unquote_plus(match[1]).strip().lower() != "token":
        return match[0]
    return f"{match[1]}=[redacted]"


def unauthorized_page(*, wrong_token: bool = False) -> Response:
    """The 401 page a browser shows without a session."""
    why = "That token is not the right one." if wrong_token else "You are not logged in."
    return Response.html(
        401,
        "<!doctype html><html lang=en><meta charset=utf-8><title>durable: log in</title>"
        f"<h1>durable dashboard</h1><p>{why} Open the URL that <code>durable ui</code> "
        "printed when it started (it ends in <code>?token=...</code>).</p></html>",
    )


def _bare_host(host: str) -> str:
    """*host* without its port, lower case, IPv6 in brackets: ``[::1]:8765`` and ``::1``
    both give ``[::1]``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    if host.count(":") > 1:  # a bare IPv6 address, as in --host ::1
        return f"[{host}]"
    return host.partition(":")[0]


def _origin(scheme: str, host: str) -> str:
    """``scheme://host[:port]`` with the scheme's default port left out."""
    scheme = scheme.lower()
    host = host.strip().lower().rstrip("/")
    name, sep, port = host.rpartition(":")
    if sep and "]" not in port and port == _DEFAULT_PORTS.get(scheme):
        host = name
    return f"{scheme}://{host}"
