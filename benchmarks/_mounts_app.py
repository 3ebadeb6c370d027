"""One server of benchmarks/mounts.py: ``python _mounts_app.py ADAPTER URL TOKEN``.

Serves the dashboard for the SQLite database at URL, mounted at /durable in a
Starlette app through ADAPTER (native: `durable.web.asgi_app`; a2wsgi; starlette:
Starlette's deprecated WSGIMiddleware), under uvicorn on a free port of 127.0.0.1.
Prints the port on stdout once it listens; runs until terminated.
"""

from __future__ import annotations

import sys

# Python puts a script's directory first on sys.path: take it off before importing.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import socket
import warnings
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from durable.web import asgi_app, make_app


def adapter(name: str, dashboard: Any) -> Any:
    if name == "native":
        return asgi_app(dashboard)
    if name == "a2wsgi":
        from a2wsgi import WSGIMiddleware

        return WSGIMiddleware(dashboard)
    if name == "starlette":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated in favour of a2wsgi
            from starlette.middleware.wsgi import WSGIMiddleware as Bridge
        return Bridge(dashboard)
    raise SystemExit(f"unknown adapter {name!r}: native, a2wsgi or starlette")


def main() -> None:
    name, url, token = sys.argv[1:4]
    dashboard = make_app(url, token=token)
    app = Starlette(routes=[Mount("/durable", app=adapter(name, dashboard))])
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
