"""`durable ui`: serve the dashboard and the REST API for one database."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
import threading
from pathlib import Path

from durable.backends import DEFAULT_URL

from ._signals import StopSignals
from .common import add_db_option, import_modules, positive

log = logging.getLogger("durable.cli")

EXAMPLES = """\
examples:
  durable ui                                   # ./durable.db on http://127.0.0.1:8765
  durable ui myapp.workflows --db postgresql://app@db/app
  durable ui --read-only --port 9000
  DURABLE_UI_TOKEN=s3cret durable ui --host 0.0.0.0 --allow-host ops.example.com

The first line on stdout is the URL to open; it holds the login token. Scripts send the
token as "Authorization: Bearer TOKEN" to the API under /api/v1. Import the MODULEs
whose workflows the dashboard should be able to start; a worker runs them.

Listening on an address other than loopback needs an explicit token (--token or
$DURABLE_UI_TOKEN), since anyone who can reach the port can try it; the traffic is plain
HTTP, so put TLS in a reverse proxy in front.
"""


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ui`` to the subcommands of the `durable` parser."""
    ui = commands.add_parser(
        "ui",
        help="serve the dashboard and the REST API",
        description="Serve the web dashboard and the JSON API (/api/v1) for a database, "
        "until Ctrl-C.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ui.add_argument(
        "modules",
        nargs="*",
        metavar="MODULE",
        help="dotted module name or .py file whose workflows may be started from the API",
    )
    add_db_option(ui)
    ui.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    ui.add_argument(
        "--port", type=int, default=8765, help="port (default: 8765; 0 picks a free one)"
    )
    ui.add_argument(
        "--token",
        default=os.environ.get("DURABLE_UI_TOKEN"),
        metavar="VALUE",
        help="the login token (default: $DURABLE_UI_TOKEN, else a random one)",
    )
    ui.add_argument(
        "--read-only",
        action="store_true",
        help="refuse start, cancel, pause, resume, retry and send, and the schedule actions",
    )
    ui.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name to accept besides localhost and 127.0.0.1 (repeatable)",
    )
    ui.add_argument(
        "--public-metrics",
        action="store_true",
        help="serve /metrics (Prometheus, needs durable[metrics]) without the token",
    )
    ui.add_argument(
        "--request-timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="seconds a client has to send a whole request before it is dropped (default: 10)",
    )
    ui.add_argument(
        "--max-connections",
        type=positive,
        default=64,
        metavar="N",
        help="connections handled at once; more are answered 503 (default: 64)",
    )
    ui.add_argument(
        "--log-level",
        default="WARNING",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="default: WARNING; DEBUG logs every request",
    )
    ui.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """`durable ui`: serve until SIGINT or SIGTERM, then exit 0."""
    from durable.runtime.defaults import configure
    from durable.web import make_app, serve

    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if not _is_loopback(args.host):
        if not args.token:
            print(
                f"durable: refusing to listen on {args.host} with a generated token: anyone "
                "who can reach it could try to log in. Pass --token VALUE (or set "
                "$DURABLE_UI_TOKEN), or listen on 127.0.0.1.",
                file=sys.stderr,
            )
            return 2
        print(
            f"durable: warning: listening on {args.host}, reachable from other machines over "
            "plain HTTP. Put a TLS reverse proxy in front.",
            file=sys.stderr,
        )
    url = args.db or DEFAULT_URL
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///").split("?", 1)[0])
        if not path.exists():
            # Opening it would create an empty database: almost surely a wrong path.
            print(f"durable: no database file at {path}; check --db.", file=sys.stderr)
            return 1
    try:
        import_modules(args.modules)
    except Exception as error:
        print(f"durable: cannot import {' '.join(args.modules)}: {error}", file=sys.stderr)
        return 2
    engine = configure(url)
    app = make_app(
        engine,
        token=args.token,
        read_only=args.read_only,
        allowed_hosts=args.allow_host,
        public_metrics=args.public_metrics,
    )
    try:
        server = serve(
            app,
            host=args.host,
            port=args.port,
            request_timeout=args.request_timeout,
            max_connections=args.max_connections,
        )
    except OSError as error:
        engine.close()
        print(f"durable: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 1
    stops = StopSignals()
    threading.Thread(target=server.serve_forever, name="durable-ui", daemon=True).start()
    print(f"{_public_url(args, server.server_port)}?token={app.token}", flush=True)
    print(
        "durable ui: open the URL above (it holds the login token); Ctrl-C stops.",
        file=sys.stderr,
        flush=True,
    )
    stops.wait()
    server.shutdown()
    server.server_close()
    engine.close()
    return 0


def _seconds(text: str) -> float:
    """A number of seconds above 0 (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0.")
    return value


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def _public_url(args: argparse.Namespace, port: int) -> str:
    """The URL to print: the bound address, or for a wildcard bind the first allowed
    host name (which the Host check accepts), else 127.0.0.1."""
    host = args.host
    if host in ("0.0.0.0", "::", ""):
        host = args.allow_host[0] if args.allow_host else "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}/"
