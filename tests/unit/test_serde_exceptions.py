"""Payload encoding (`durable.core.serde`, `durable.core.error_payloads`): recorded
exceptions keep their class, args and attributes; a record or tag never builds a class
that is not an exception."""

from __future__ import annotations

import datetime as dt
import errno
import json
import pickle
import threading
import traceback
from typing import Any

import pytest

from durable.core.error_payloads import dump_error, load_error
from durable.core.serde import dumps, loads
from durable.errors import (
    NondeterminismError,
    PayloadError,
    PickleRefused,
    RecordedError,
)
from tests.unit._serde_helpers import (
    HERE,
    POST_INIT_CALLS,
    TRAP_CALLS,
    Derived,
    Point,
    _reset_call_logs,  # noqa: F401 (autouse fixture)
    catch,
    roundtrip,
)

# -- module-level types (importable by name, as tags require) -------------------------


class CodedError(Exception):
    def __init__(self, code: int, msg: str) -> None:
        super().__init__(msg)
        self.code = code


class BadStrError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


# -- exceptions --------------------------------------------------------------------------


def error_roundtrip(error: BaseException, *, allow_pickle: bool = False) -> BaseException:
    data = dump_error(error, allow_pickle=allow_pickle)
    return load_error(data, allow_pickle=allow_pickle, run_id="run-e", position=1)


def raised(error: BaseException) -> BaseException:
    """*error* after being raised, so that it has a traceback."""
    try:
        raise error
    except BaseException as caught:
        return caught


def test_builtin_value_error_keeps_type_and_args() -> None:
    """A ValueError comes back as ValueError with the same args and message."""
    loaded = error_roundtrip(raised(ValueError("bad value", 3)))
    assert type(loaded) is ValueError
    assert loaded.args == ("bad value", 3)
    assert str(loaded) == str(ValueError("bad value", 3))


def test_key_error_keeps_its_repr_style_message() -> None:
    """A KeyError comes back as KeyError whose str is the quoted key."""
    loaded = error_roundtrip(KeyError("missing"))
    assert type(loaded) is KeyError
    assert loaded.args == ("missing",)
    assert str(loaded) == "'missing'"


def test_os_error_keeps_errno_strerror_and_filename() -> None:
    """An OSError keeps its subclass, errno, strerror and filename (kept outside args)."""
    original = OSError(errno.ENOENT, "No such file or directory", "/tmp/missing.txt")
    loaded = error_roundtrip(original)
    assert type(loaded) is FileNotFoundError
    assert isinstance(loaded, OSError)
    assert loaded.errno == errno.ENOENT
    assert loaded.strerror == "No such file or directory"
    assert loaded.filename == "/tmp/missing.txt"
    assert str(loaded) == str(original)


def test_syntax_error_keeps_its_location() -> None:
    """A SyntaxError keeps its file, line and offset."""
    original = catch(lambda: compile("x = (", "<cell>", "exec"))
    loaded = error_roundtrip(original)
    assert type(loaded) is SyntaxError
    assert isinstance(original, SyntaxError)
    assert isinstance(loaded, SyntaxError)
    assert (loaded.filename, loaded.lineno, loaded.offset) == (
        original.filename,
        original.lineno,
        original.offset,
    )


def test_custom_exception_with_custom_init_keeps_attributes() -> None:
    """A custom __init__(code, msg) is not called on load; args and .code come back."""
    loaded = error_roundtrip(raised(CodedError(404, "not found")))
    assert type(loaded) is CodedError
    assert loaded.args == ("not found",)
    assert loaded.code == 404
    assert str(loaded) == "not found"


def test_durable_error_keeps_structured_fields() -> None:
    """A NondeterminismError keeps run_id/position/... and still pickles with them."""
    original = NondeterminismError(
        "diverged", run_id="r1", position=4, recorded="task a (v1:00)", current="task b (v1:11)"
    )
    loaded = error_roundtrip(original)
    assert type(loaded) is NondeterminismError
    assert isinstance(loaded, NondeterminismError)
    assert (loaded.run_id, loaded.position) == ("r1", 4)
    assert (loaded.recorded, loaded.current) == ("task a (v1:00)", "task b (v1:11)")
    assert str(loaded) == "diverged"
    again = pickle.loads(pickle.dumps(loaded))
    assert (again.run_id, again.position, again.message) == ("r1", 4, "diverged")


def test_local_exception_class_becomes_recorded_error() -> None:
    """An exception class that cannot be imported loads as RecordedError with type and trace."""

    class LocalError(Exception):
        pass

    def fail_here() -> None:
        raise LocalError("local trouble")

    original = catch(fail_here)
    loaded = error_roundtrip(original)
    assert type(loaded) is RecordedError
    assert isinstance(loaded, RecordedError)
    assert loaded.type_name == f"{__name__}:{LocalError.__qualname__}"
    assert "local trouble" in str(loaded)
    assert "fail_here" in loaded.recorded_traceback
    assert loaded.recorded_traceback == "".join(traceback.format_exception(original))


def test_unencodable_attribute_is_dropped_not_fatal() -> None:
    """An attribute that cannot be stored is dropped; the error and other attributes record."""
    original = CodedError(1, "boom")
    original.lock = threading.Lock()
    for allow_pickle in (False, True):
        loaded = error_roundtrip(original, allow_pickle=allow_pickle)
        assert type(loaded) is CodedError
        assert loaded.code == 1
        assert not hasattr(loaded, "lock")


def test_dropped_attribute_does_not_mark_the_record_pickled() -> None:
    """An attribute dropped half-way (a pickled part, then a failure) leaves no P header."""
    original = CodedError(2, "mixed")
    original.mixed = [Point(1, 2), threading.Lock()]
    data = dump_error(original, allow_pickle=True)
    assert data[:1] == b"j"
    loaded = load_error(data, allow_pickle=False)
    assert type(loaded) is CodedError
    assert not hasattr(loaded, "mixed")


def test_picklable_attribute_is_kept_with_pickling_allowed() -> None:
    """With allow_pickle an attribute only pickle can store is kept (and the record is P)."""
    original = CodedError(3, "with point")
    original.point = Point(5, 6)
    data = dump_error(original, allow_pickle=True)
    assert data[:1] == b"P"
    assert load_error(data, allow_pickle=True).point == Point(5, 6)
    assert type(catch(lambda: load_error(data, allow_pickle=False))) is PickleRefused


def test_unencodable_args_fall_back_to_the_message() -> None:
    """When args cannot be stored the error still loads, with the message as its args."""
    original = ValueError(threading.Lock())
    loaded = error_roundtrip(original)
    assert type(loaded) is ValueError
    assert loaded.args == (str(original),)


def test_cyclic_args_still_record() -> None:
    """An exception whose args contain themselves still records instead of raising."""
    cycle: list[Any] = []
    cycle.append(cycle)
    loaded = error_roundtrip(ValueError(cycle))
    assert type(loaded) is ValueError
    assert loaded.args == ("[[...]]",)


def test_exception_whose_str_raises_still_records() -> None:
    """An exception whose __str__ raises records with a placeholder message."""
    data = dump_error(raised(BadStrError("x")), allow_pickle=False)
    record = json.loads(data[1:])
    assert "str() failed" in record["message"]
    loaded = load_error(data, allow_pickle=False)
    assert type(loaded) is BadStrError
    assert loaded.args == ("x",)


def test_exception_message_with_lone_surrogate_records() -> None:
    """A message holding a lone surrogate (from os.fsdecode) records and loads back."""
    original = FileNotFoundError(errno.ENOENT, "No such file", "caf\udce9.txt")
    loaded = error_roundtrip(original)
    assert type(loaded) is FileNotFoundError
    assert loaded.filename == "caf\udce9.txt"


def test_exception_group_round_trips_with_pickling_allowed() -> None:
    """An ExceptionGroup (whose __new__ needs its args) comes back with its sub-errors."""
    original = ExceptionGroup("several", [ValueError("a"), KeyError("b")])
    loaded = error_roundtrip(original, allow_pickle=True)
    assert type(loaded) is ExceptionGroup
    assert isinstance(loaded, ExceptionGroup)
    assert loaded.message == "several"
    assert [type(e) for e in loaded.exceptions] == [ValueError, KeyError]


def test_exception_group_round_trips_without_pickling() -> None:
    """Pickles are off by default, so the exceptions a group holds are stored by class
    name like any exception: nested groups, custom attributes, and code that runs
    ``except*`` on the loaded group sees the same sub-errors."""
    inner = ExceptionGroup("inner", [CodedError(7, "seven")])
    loaded = error_roundtrip(raised(ExceptionGroup("outer", [ValueError("a"), inner])))
    assert type(loaded) is ExceptionGroup and str(loaded) == "outer (2 sub-exceptions)"
    first, nested = loaded.exceptions
    assert type(first) is ValueError and first.args == ("a",)
    assert type(nested) is ExceptionGroup
    (coded,) = nested.exceptions
    assert type(coded) is CodedError and (coded.args, coded.code) == (("seven",), 7)
    caught: list[str] = []
    try:
        raise loaded
    except* CodedError as group:
        caught.append(repr(group.exceptions))
    except* ValueError as group:
        caught.append(repr(group.exceptions))
    assert caught == [
        "(ExceptionGroup('inner', [CodedError('seven')]),)",
        "(ValueError('a'),)",
    ]


def test_exceptions_as_values_round_trip_without_pickling() -> None:
    """An exception returned or passed as a value keeps its class, args and attributes;
    an attribute that cannot be stored is dropped, not the exception."""
    original = CodedError(404, "not found")
    original.note = {"when": dt.date(2025, 1, 2)}
    original.socket = threading.Lock()  # not storable without a pickle: dropped
    loaded = roundtrip({"errors": [original, KeyError("k")]})["errors"]
    assert type(loaded[0]) is CodedError
    assert (loaded[0].args, loaded[0].code) == (("not found",), 404)
    assert loaded[0].note == {"when": dt.date(2025, 1, 2)}
    assert not hasattr(loaded[0], "socket")
    assert type(loaded[1]) is KeyError and loaded[1].args == ("k",)


def test_a_local_exception_in_a_group_needs_a_pickle() -> None:
    """A sub-error whose class cannot be imported by name cannot be stored as JSON, so
    without pickles the group is recorded as a RecordedError (with its traceback)."""

    class Local(Exception):
        pass

    loaded = error_roundtrip(ExceptionGroup("several", [Local("x")]))
    assert type(loaded) is RecordedError
    assert loaded.type_name == "builtins:ExceptionGroup"
    assert "Local: x" in loaded.recorded_traceback


def test_an_exception_tag_naming_another_class_builds_nothing() -> None:
    """The exception tag builds only exception classes: a Trap or os.system is refused
    before anything is called."""
    TRAP_CALLS.clear()
    for ref in (f"{HERE}:Trap", "os:system"):
        node = {"$durable": "exception", "cls": ref, "args": []}
        with pytest.raises(PayloadError):
            loads(b"j" + json.dumps(node).encode(), allow_pickle=False)
    assert TRAP_CALLS == []


def test_error_record_naming_a_non_exception_class_is_a_recorded_error() -> None:
    """A record whose type is not an exception class (even a cached one) is not built."""
    roundtrip(Derived(2))  # caches tests...:Derived as a dataclass
    POST_INIT_CALLS.clear()
    for type_ref in (f"{HERE}:Derived", f"{HERE}:Trap", "os:system"):
        data = b"j" + json.dumps({"type": type_ref, "message": "m", "args": ["m"]}).encode()
        loaded = load_error(data, allow_pickle=False)
        assert type(loaded) is RecordedError
        assert loaded.type_name == type_ref
    assert POST_INIT_CALLS == []
    assert TRAP_CALLS == []


@pytest.mark.parametrize(
    "data",
    [b"", b"j[1, 2", b"j5", b'j{"message": "no type"}', dumps([1], allow_pickle=False, where="")],
    ids=["empty", "truncated", "scalar", "no-type", "list"],
)
def test_load_error_of_a_non_error_raises_payload_error(data: bytes) -> None:
    """load_error of something that is not a recorded error raises PayloadError."""
    error = catch(lambda: load_error(data, allow_pickle=False, run_id="run-x", position=2))
    assert type(error) is PayloadError
    assert "run-x" in str(error)


def test_error_attribute_named_like_the_tag_is_dropped() -> None:
    """An attribute called "$durable" would read as a type tag, so it is not recorded."""
    original = CodedError(5, "tagged")
    setattr(original, "$durable", "pickle")
    loaded = error_roundtrip(original)
    assert type(loaded) is CodedError
    assert loaded.code == 5
