"""Owner strings name a place (host, boot, PID namespace); /proc judges only owners there.

Workers that share a host name but not a PID namespace (containers with a fixed
``hostname:``, ``--network host``, cloned VMs) must never look each other's pids up in
their own /proc: the pid means another process there. Such owners, and owners written
in the old ``host:pid:start:nonce`` form, are judged by their lease alone. Real PID
namespaces are in tests/e2e/test_pid_namespaces.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from durable import RunStatus, workflow
from durable.core.hashing import call_hash
from durable.core.records import NewRun
from durable.runtime import owners

linux = pytest.mark.skipif(not Path("/proc/self/ns/pid").exists(), reason="Linux /proc only")


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    """Forget what owners cached about this process before and after each test."""
    owners.forget()
    yield
    owners.forget()


def exited_owner() -> str:
    """The owner string of a process in this place that has exited (and been reaped)."""
    code = "from durable.runtime import owners; print(owners.new_owner())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@linux
def test_an_owner_names_host_boot_and_pid_namespace() -> None:
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    namespace = os.stat("/proc/self/ns/pid").st_ino
    place, pid, start, nonce = owners.new_owner().rsplit(":", 3)
    assert place == owners.place() == f"{owners.host()}@{boot}.{namespace}"
    assert pid == str(os.getpid()) and start.isdigit() and start != "0" and nonce
    assert owners.judges_here()


@linux
def test_an_exited_process_in_this_place_is_dead() -> None:
    owner = exited_owner()
    assert owner.startswith(owners.place() + ":")
    assert owners.is_dead(owner)


@linux
def test_a_live_owner_is_alive() -> None:
    assert not owners.is_dead(owners.new_owner())


@linux
def test_this_pid_with_another_start_time_is_dead() -> None:
    """The owner was an earlier process that had our pid."""
    assert owners.is_dead(f"{owners.place()}:{os.getpid()}:1:x")


@linux
def test_an_owner_in_the_old_format_waits_for_its_lease() -> None:
    """``host:pid:start:nonce``, written by an older durable: its pid may belong to
    another PID namespace, so it is never judged by this /proc."""
    _, pid, start, nonce = exited_owner().rsplit(":", 3)
    assert not owners.is_dead(f"{owners.host()}:{pid}:{start}:{nonce}")
    assert not owners.is_dead(f"{owners.host()}:{os.getpid()}:1:x")


@linux
@pytest.mark.parametrize("where", ["namespace", "boot", "host"])
def test_an_owner_in_another_place_waits_for_its_lease(where: str) -> None:
    """Same host name, another PID namespace (a container) or another boot (a cloned
    VM); or another host: a pid there says nothing about a pid here."""
    _, pid, start, nonce = exited_owner().rsplit(":", 3)
    host, _, rest = owners.place().partition("@")
    boot, _, namespace = rest.partition(".")
    other = {
        "namespace": f"{host}@{boot}.{int(namespace) + 1}",
        "boot": f"{host}@00000000-0000-0000-0000-000000000000.{namespace}",
        "host": f"elsewhere@{boot}.{namespace}",
    }[where]
    assert not owners.is_dead(f"{other}:{pid}:{start}:{nonce}")
    assert not owners.is_dead(f"{other}:{os.getpid()}:1:x")


def test_without_a_boot_id_nothing_is_judged_by_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the place cannot be told (not Linux, no /proc), owners carry an unknown
    place and every owner, even one of ours, is left to its lease."""
    monkeypatch.setattr(owners, "BOOT_ID", "/nonexistent/boot_id")
    assert owners.place() == f"{owners.host()}@unknown"
    assert not owners.judges_here()
    owner = owners.new_owner()
    assert owner.startswith(f"{owners.host()}@unknown:{os.getpid()}:")
    assert not owners.is_dead(f"{owners.place()}:999999:1:gone")
    assert not owners.is_dead(f"{owners.place()}:{os.getpid()}:1:x")


@linux
def test_a_proc_of_another_pid_namespace_is_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc mounted for another PID namespace (``unshare --pid`` without a new /proc):
    its /proc/self is not our pid, and its pids are not ours."""
    real = os.readlink
    monkeypatch.setattr(
        os, "readlink", lambda path: "4242" if str(path) == "/proc/self" else real(path)
    )
    assert owners.place() == f"{owners.host()}@unknown"
    assert not owners.is_dead(f"{owners.place()}:999999:1:gone")


def test_host_names_cannot_forge_a_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """':' separates the fields and '@' the place's parts: a host name has neither."""
    monkeypatch.setattr(owners.socket, "gethostname", lambda: "evil:1@boot.2")
    assert owners.host() == "evil_1_boot.2"
    assert owners.place().startswith("evil_1_boot.2@")


@pytest.mark.parametrize("owner", [None, "", "garbage", "a:b:c", "x@y.z:notapid:1:n"])
def test_unparseable_owners_are_not_dead(owner: str | None) -> None:
    assert not owners.is_dead(owner)


@workflow
def owned(name: str) -> str:
    return name.upper()


def orphan(engine: durable.Engine, run_id: str, owner: str) -> None:
    """A running run under *owner*, leased for a minute."""
    call = owned.bind(run_id)
    engine.backend.create_run(
        NewRun(
            id=run_id,
            workflow=owned.name,
            input=engine.dump({"args": [run_id], "kwargs": {}}, "input"),
            call_hash=call_hash(owned.kind, owned.name, call.arguments),
            owner=owner,
            lease=60,
        )
    )


BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@linux
@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_recover_takes_over_only_dead_owners_of_this_place(engine: durable.Engine) -> None:
    """recover() resumes at once a run whose owner in this place has exited; runs of
    same-named hosts elsewhere, and of old-format owners, keep their leases."""
    dead = exited_owner()
    _, pid, start, nonce = dead.rsplit(":", 3)
    host, _, rest = owners.place().partition("@")
    boot, _, namespace = rest.partition(".")
    orphan(engine, "here", dead)
    orphan(engine, "other-namespace", f"{host}@{boot}.{int(namespace) + 1}:{pid}:{start}:{nonce}")
    orphan(engine, "old-format", f"{host}:{pid}:{start}:{nonce}")
    assert durable.recover() == ["here"]
    assert engine.reread("here").status is RunStatus.COMPLETED
    for run_id in ("other-namespace", "old-format"):
        run = engine.reread(run_id)
        assert run.status is RunStatus.RUNNING and run.epoch == 1, run_id
