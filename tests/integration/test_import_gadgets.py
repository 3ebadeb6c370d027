"""A JSON payload never imports a module: not in a worker resuming the run, not in
`durable show` / `durable history`, not in the REST API.

Each test writes a gadget module into a folder on the path: importing it creates a
marker file. Rows whose type tags name the gadget (as a dataclass, an enum, a pydantic
model, an exception, a recorded error's type) must leave the marker absent, and the
run must fail with an error that names the module and says to import it. A tag naming
`durable.__main__` (which runs the command line when imported) must not stop the
dashboard's API from answering.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import RunStatus
from durable.errors import PayloadError
from durable.web import make_app
from tests.integration import bad_rows_app as app
from tests.integration.gadgets import ROOT, GadgetModule, payload, write_gadget
from tests.integration.test_bad_rows import (
    overwrite,
    recorded_error,
    suspended_after_one_step,
)
from tests.web.client import Client

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
TOKEN = "gadget-test-token-0123456789"


@pytest.fixture
def gadget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GadgetModule]:
    made = write_gadget(tmp_path)
    monkeypatch.syspath_prepend(str(made.folder))
    monkeypatch.delenv("DURABLE_SECRET_KEY", raising=False)
    yield made
    sys.modules.pop(made.name, None)


def gadget_values(gadget: GadgetModule) -> list[Any]:
    """One value per kind of class tag, each naming the gadget module."""
    return [
        gadget.tag("dataclass", "Gadget", v={"name": "x"}),
        gadget.tag("enum", "Colour", v="red"),
        gadget.tag("pydantic", "Gadget", json={"name": "x"}),
        gadget.tag("exception", "Boom", args=["boom"]),
    ]


def gadget_rows(engine: durable.Engine, url: str, gadget: GadgetModule) -> list[str]:
    """Runs whose stored rows name the gadget: inputs of queued runs (one per tag kind),
    a recorded step output, and a recorded error's type. Returns the queued run ids."""
    suspended_after_one_step(engine, "gadget-step")  # first: its worker takes queued runs
    queued = []
    for index, value in enumerate(gadget_values(gadget)):
        run_id = f"gadget-input-{index}"
        durable.dispatch(app.greet, run_id, id=run_id)
        overwrite(engine, url, run_id, "input", payload({"args": [value], "kwargs": {}}))
        queued.append(run_id)
    output = payload(gadget.tag("dataclass", "Gadget", v={"name": "x"}))
    overwrite(engine, url, "gadget-step", "output", output, position=0)
    error = {"type": f"{gadget.name}:Boom", "message": "boom", "traceback": "", "args": ["boom"]}
    overwrite(engine, url, "gadget-step", "error", payload(error))
    return queued


def durable_cli(gadget: GadgetModule, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m durable ARGS --db URL` with the gadget's folder on its path."""
    return subprocess.run(
        [sys.executable, "-m", "durable", *args, "--db", url],
        cwd=ROOT,
        env=gadget.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_views_never_import_a_module_a_row_names(
    url: str, engine: durable.Engine, gadget: GadgetModule
) -> None:
    """`durable show`, `durable history` and GET /api/v1/runs/ID show the tagged values
    as what they claim to be, and the gadget module is never imported."""
    queued = gadget_rows(engine, url, gadget)
    for run_id in [*queued, "gadget-step"]:
        for command in ("show", "history"):
            done = durable_cli(gadget, url, command, run_id, "-o", "json")
            assert done.returncode == 0, done.stderr
            assert not gadget.marker.exists(), f"durable {command} {run_id} imported it"
    shown = json.loads(durable_cli(gadget, url, "show", "gadget-input-0", "-o", "json").stdout)
    assert shown["input"]["args"] == [{"type": "Gadget", "name": "x"}]
    history = json.loads(durable_cli(gadget, url, "history", "gadget-step", "-o", "json").stdout)
    assert history["items"][0]["output"] == {"type": "Gadget", "name": "x"}

    web = make_app(engine, token=TOKEN)
    try:
        client = Client(web, token=TOKEN)
        for run_id in [*queued, "gadget-step"]:
            for path in (f"/api/v1/runs/{run_id}", f"/api/v1/runs/{run_id}/history"):
                reply = client.request("GET", path)
                assert reply.status == 200, reply.body
                assert not gadget.marker.exists(), f"GET {path} imported it"
        detail = client.request("GET", "/api/v1/runs/gadget-step").json()
        assert detail["error"]["type"] == f"{gadget.name}.Boom"
        inputs = [client.request("GET", f"/api/v1/runs/{r}").json()["input"] for r in queued]
        assert [shown["args"][0] for shown in inputs] == [
            {"type": "Gadget", "name": "x"},
            "Colour('red')",
            {"type": "Gadget", "name": "x"},
            "Boom('boom')",
        ]
    finally:
        web.close()
    assert gadget.name not in sys.modules


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_worker_never_imports_a_module_a_row_names(
    url: str, engine: durable.Engine, gadget: GadgetModule, tmp_path: Path
) -> None:
    """A `durable worker` process resuming runs whose rows name the gadget fails each of
    them with a PayloadError that names the module and says to import it in the worker;
    it never imports the gadget, and it keeps serving other runs."""
    queued = gadget_rows(engine, url, gadget)
    durable.send("gadget-step", "go")
    log_path = tmp_path / "worker.log"
    command = [sys.executable, "-m", "durable", "worker", "tests.integration.bad_rows_app"]
    with log_path.open("w") as log:
        worker = subprocess.Popen(
            [*command, "--db", url, "--log-level", "INFO"],
            cwd=ROOT,
            env=gadget.env(),
            stdout=subprocess.DEVNULL,
            stderr=log,
            text=True,
        )
    try:
        for run_id in [*queued, "gadget-step"]:
            error = recorded_error(engine, run_id)
            assert isinstance(error, PayloadError), f"{run_id}: {error!r}"
            assert gadget.name in str(error) and "import" in str(error), str(error)
            assert "worker" in str(error), str(error)
        assert durable.dispatch(app.greet, "after", id="after").result(timeout=30)
        assert worker.poll() is None, log_path.read_text()
    finally:
        if worker.poll() is None:
            worker.terminate()
        worker.wait(30)
    assert not gadget.marker.exists(), "the worker imported the gadget module"
    assert engine.backend.get_run("after").status is RunStatus.COMPLETED  # type: ignore[union-attr]


def test_a_worker_that_imported_the_module_reads_the_row(
    memory_engine: durable.Engine, gadget: GadgetModule
) -> None:
    """The same tags load as before in a process that imported the module itself."""
    module = __import__(gadget.name)
    assert gadget.marker.exists()
    dataclass, enum, _pydantic, exception = gadget_values(gadget)
    loaded = memory_engine.load(payload([dataclass, enum, exception]), "r", 0)
    assert loaded[:2] == [module.Gadget("x"), module.Colour.RED]
    assert type(loaded[2]) is module.Boom and loaded[2].args == ("boom",)


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_tag_naming_durable_main_does_not_stop_the_dashboard(
    url: str, engine: durable.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`durable.__main__` runs the command line when imported. A row that names it is
    shown as what it claims, and the API keeps answering afterwards."""
    monkeypatch.setattr(sys, "argv", ["durable", "ls", "--db", url])
    sys.modules.pop("durable.__main__", None)
    durable.dispatch(app.greet, "main-gadget", id="main-gadget")
    tag = {"$durable": "dataclass", "cls": "durable.__main__:Anything", "v": {}}
    overwrite(engine, url, "main-gadget", "input", payload({"args": [tag], "kwargs": {}}))
    web = make_app(engine, token=TOKEN)
    try:
        client = Client(web, token=TOKEN)
        for _ in range(2):
            reply = client.request("GET", "/api/v1/runs/main-gadget")
            assert reply.status == 200, reply.body
            assert reply.json()["input"]["args"] == [{"type": "Anything"}]
            assert client.request("GET", "/api/v1/runs").status == 200
        assert "durable.__main__" not in sys.modules
    finally:
        web.close()
