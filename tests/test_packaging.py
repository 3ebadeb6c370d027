"""The public surface: what `durable` exports, and that it ships its type information."""

from __future__ import annotations

import types
from pathlib import Path

import durable
import durable.cli.main
import durable.errors
import durable.testing


def public_names(module: types.ModuleType) -> list[str]:
    return sorted(
        (
            name
            for name, value in vars(module).items()
            if not name.startswith("_") and not isinstance(value, types.ModuleType)
        ),
        key=str.casefold,
    )


def test_all_is_sorted_and_complete() -> None:
    """durable.__all__ lists exactly the public names (plus the errors module), sorted."""
    assert durable.__all__ == sorted(durable.__all__)
    assert set(durable.__all__) - {"errors"} == set(public_names(durable)) - {"annotations"}


def test_every_public_error_derives_from_durable_error() -> None:
    """The error tree has one root, and every error in it is exported; Cancelled is the
    one signal outside it (a BaseException, so `except Exception` cannot swallow it)."""
    for name in durable.errors.__all__:
        error = getattr(durable.errors, name)
        if error is durable.errors.Cancelled:
            assert not issubclass(error, Exception)
            continue
        assert issubclass(error, durable.errors.DurableError), name
    exported = {
        name
        for name, value in vars(durable.errors).items()
        if isinstance(value, type) and issubclass(value, durable.errors.DurableError)
    }
    assert exported | {"Cancelled"} == set(durable.errors.__all__)


def test_errors_survive_pickling() -> None:
    """Errors keep their structured fields through pickle (they cross processes)."""
    import pickle

    error = durable.errors.NondeterminismError(
        "diverged", run_id="r", position=3, recorded="a", current="b"
    )
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and (copy.run_id, copy.position) == ("r", 3)
    assert str(copy) == "diverged"


def test_testing_module_exports() -> None:
    """durable.testing exposes the test kit, the conformance suite and the memory backend."""
    assert set(durable.testing.__all__) == {
        "CHECKS",
        "DurableEnv",
        "FAULT_POINTS",
        "History",
        "InjectedFault",
        "MemoryBackend",
        "VirtualClock",
        "arm_fault",
        "check_backend",
        "disarm_faults",
        "export_history",
        "replay",
    }


def test_py_typed_ships() -> None:
    """The package carries its PEP 561 marker."""
    assert (Path(durable.__file__).parent / "py.typed").exists()


SQL_FILES = (
    "backends/sql/__init__.py",
    "backends/sql/_outbox.py",
    "backends/sql/_commit_hooks.py",
    "backends/_schema.py",
    "backends/_tallies_schema.py",
    "backends/_tally_sql.py",
    "backends/_migrations.py",
    "backends/_statements/queues.py",
    "backends/_statements/debounce.py",
    "backends/_statements/__init__.py",
    "backends/_statements/base.py",
    "backends/_statements/runs.py",
    "backends/_statements/continuing.py",
    "backends/_statements/history.py",
    "backends/_statements/waits.py",
    "backends/_statements/inspection.py",
    "backends/_statements/control.py",
    "backends/_statements/schedules.py",
    "backends/_statements/attributes.py",
    "backends/_statements/streams.py",
    "backends/_statements/tallies.py",
)


def test_sqlalchemy_stays_in_the_backend_files() -> None:
    """Only the backend's SQL files (SQL_FILES) import SQLAlchemy."""
    root = Path(durable.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "sqlalchemy" in path.read_text() and path.relative_to(root).as_posix() not in SQL_FILES
    ]
    assert offenders == []


def test_installed_entry_points_resolve() -> None:
    """The console script and the pytest plugin that pip installed load real code (CI
    installs the package afresh, so this reads what a new user's pip would write)."""
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="durable")
    (plugin,) = entry_points(group="pytest11", name="durable")
    assert script.load() is durable.cli.main.main
    assert hasattr(plugin.load(), "durable_env")
