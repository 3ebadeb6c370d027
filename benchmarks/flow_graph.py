"""The dashboard's graph of a big flow: ``python benchmarks/flow_graph.py [--quick]``.

One JSON line per backend (SQLite by default; ``--backends sqlite,postgres`` adds
PostgreSQL at ``$DURABLE_BENCH_POSTGRES_URL``) on stdout, progress on stderr. Each
backend gets a fresh database and runs one flow of N ``true`` commands (1,000; 100 with
--quick) with random dependencies (each task depends on 1 to 3 of the 50 before it:
about two per task) and ``max_running = 16`` to its end, on an in-process worker; then
the dashboard serves it and headless Chromium draws it.

* payload_bytes, payload_gzip_bytes: the size of ``GET /api/v1/flows/<id>`` (the view
  and its layout) as sent, and gzipped (what a compressing proxy would send).
* ms_get_flow: the server's time for that GET (the view read from the database, the
  layout served from its cache), median of 5; ms_layout_cold: the layout alone,
  computed afresh.
* ms_render_navigation: in Chromium, from the navigation to the flow page to every box
  and arrow painted (the page's data-navigation-ms); ms_render_page: from the page
  mounting (its script running) to the same; ms_render_build: building the SVG.
  Null, with render_skipped saying why, where Chromium or selenium is missing.

The issue's bar: 1,000 tasks must render and stay usable (the browser test asserts
under 10 s; this prints the number).
"""

from __future__ import annotations

import sys

# Python puts a script's directory first on sys.path: take it off before importing.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import contextlib
import gzip
import importlib.util
import io
import json
import os
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote
from wsgiref.util import setup_testing_defaults

import durable
from durable import flows
from durable.web import WebApp, _flow_layout, make_app, serve

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
CHROMIUM = os.environ.get("DURABLE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("DURABLE_CHROMEDRIVER", "/usr/bin/chromedriver")
MAX_RUNNING = 16
TOKEN = "bench"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def flow_file(n: int, seed: int = 18) -> tuple[str, int]:
    """A flow of *n* ``true`` commands, each depending on 1 to 3 of the 50 before it;
    the file and its number of dependencies."""
    rng = random.Random(seed)
    lines = ["[flow]", 'name = "graph"', f"max_running = {MAX_RUNNING}", ""]
    edges = 0
    for i in range(n):
        lines += [f"[task.t{i}]", 'command = ["true"]']
        if i:
            deps = sorted({rng.randrange(max(0, i - 50), i) for _ in range(rng.randint(1, 3))})
            edges += len(deps)
            lines.append("depends_on = [" + ", ".join(f'"t{d}"' for d in deps) + "]")
        lines.append("")
    return "\n".join(lines), edges


def get(app: WebApp, path: str) -> tuple[int, bytes]:
    """GET *path* from *app* in-process, as a bearer client."""
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "HTTP_AUTHORIZATION": f"Bearer {TOKEN}",
        "HTTP_HOST": "127.0.0.1",
        "wsgi.input": io.BytesIO(),
    }
    setup_testing_defaults(environ)
    status: list[str] = []
    body = b"".join(app(environ, lambda line, headers: status.append(line)))
    return int(status[0][:3]), body


def render(url: str, flow_id: str) -> dict[str, Any]:
    """Open the flow page in headless Chromium; the page's own timings of its drawing."""
    if importlib.util.find_spec("selenium") is None:
        return {"render_skipped": "selenium is not installed"}
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return {"render_skipped": f"{path} is missing"}
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get(f"{url}/?token={TOKEN}")
        driver.get(f"{url}/#/flows/{quote(flow_id, safe='')}")
        script = (
            "const box = document.querySelector('#flow-graph-box');"
            "return box && box.hasAttribute('data-rendered-ms') ? "
            "[box.dataset.navigationMs, box.dataset.renderedMs, box.dataset.buildMs,"
            " document.querySelectorAll('g.task').length,"
            " document.querySelectorAll('path.flow-edge').length] : null;"
        )
        deadline = time.monotonic() + 60
        while (found := driver.execute_script(script)) is None:
            if time.monotonic() > deadline:
                raise SystemExit("the flow page did not render within 60 s")
            time.sleep(0.05)
    finally:
        driver.quit()
    navigation, page, build, boxes, arrows = found
    return {
        "ms_render_navigation": round(float(navigation), 1),
        "ms_render_page": round(float(page), 1),
        "ms_render_build": round(float(build), 1),
        "boxes_drawn": boxes,
        "arrows_drawn": arrows,
    }


def one(url: str, n: int, directory: Path) -> dict[str, Any]:
    os.environ["DURABLE_FLOW_DIR"] = str(directory / "state")
    text, edges = flow_file(n)
    path = directory / "graph.toml"
    path.write_text(text)
    with durable.Engine(url) as engine:
        worker = durable.Worker(engine, concurrency=MAX_RUNNING + 4, poll=0.05).start()
        try:
            began = time.perf_counter()
            flows.start(path, id="graph", engine=engine).result(timeout=900)
            log(f"  the flow ran in {time.perf_counter() - began:.1f} s")
        finally:
            worker.stop(grace=5.0)
        app = make_app(engine, token=TOKEN)
        status, body = get(app, "/api/v1/flows/graph")
        assert status == 200, body[:300]
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            get(app, "/api/v1/flows/graph")
            timings.append((time.perf_counter() - started) * 1000)
        view = json.loads(body)
        _flow_layout._cached.cache_clear()
        started = time.perf_counter()
        _flow_layout.layout_flow(view)
        layout_ms = (time.perf_counter() - started) * 1000
        server = serve(app, host="127.0.0.1", port=0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            drawn = render(f"http://127.0.0.1:{server.server_port}", "graph")
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
    return {
        "tasks": n,
        "dependencies": edges,
        "layers": view["layout"]["layers"],
        "picture_px": [view["layout"]["width"], view["layout"]["height"]],
        "payload_bytes": len(body),
        "payload_gzip_bytes": len(gzip.compress(body)),
        "ms_get_flow": round(statistics.median(timings), 1),
        "ms_layout_cold": round(layout_ms, 1),
        "ms_render_navigation": None,
        "ms_render_page": None,
        "ms_render_build": None,
        **drawn,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="100 tasks: a smoke test")
    parser.add_argument("--tasks", type=int, default=None)
    parser.add_argument("--backends", default="sqlite", help="sqlite,postgres")
    parser.add_argument("--tmpdir", default=None, help="where SQLite files go")
    args = parser.parse_args()
    n = args.tasks or (100 if args.quick else 1000)
    pg = os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    for backend in args.backends.split(","):
        if backend not in ("sqlite", "postgres"):
            raise SystemExit(f"unknown backend {backend!r}: sqlite or postgres")
        with contextlib.ExitStack() as stack:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=args.tmpdir)))
            if backend == "sqlite":
                url = f"sqlite:///{directory / 'graph.db'}"
            else:
                url = stack.enter_context(_fresh_pg(pg))
            log(f"{backend}: a flow of {n} tasks...")
            name = "postgresql" if backend == "postgres" else backend
            print(json.dumps({"backend": name, **one(url, n, directory)}), flush=True)


@contextlib.contextmanager
def _fresh_pg(url: str) -> Iterator[str]:
    """A new empty database on the server at *url* for one run, dropped afterwards."""
    import sqlalchemy as sa

    name = f"bench_flow_graph_{os.getpid()}_{int(time.time())}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield url.rsplit("/", 1)[0] + "/" + name
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    main()
