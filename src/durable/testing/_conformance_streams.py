"""The Backend contract of streams (`StreamStore`), as executable checks (see
`_conformance.py`): items at offsets 0, 1, 2... in commit order, a workflow's numbered
writes stored once, writes fenced like steps, a close marker that ends the stream,
watchers woken by a write, and streams purged with their run."""

from __future__ import annotations

from durable.core.records import RunStatus
from durable.errors import InvalidValue, LeaseLost

from ._conformance import MakeBackend, _opened, _race
from ._conformance import _new as _running

#: What a write's topic is (`core.streams.stream_topic`).
TOPIC = "stream:run-1"


def _values(backend: object, name: str, offset: int = 0) -> list[tuple[int, bytes | None]]:
    items = backend.read_stream("run-1", name, offset, limit=100)  # type: ignore[attr-defined]
    return [(item.offset, item.payload) for item in items]


def _refused(call: object, error: type[BaseException], why: str) -> None:
    try:
        call()  # type: ignore[operator]
    except error:
        return
    raise AssertionError(why)


def check_stream_write_read_and_close(make: MakeBackend) -> None:
    """write_stream appends at offsets 0, 1, 2... per stream; read_stream reads from any
    offset, up to a limit; a close marker (no payload) ends the stream, a later value is
    refused with InvalidValue, closing again writes nothing; streams() lists each
    stream's values and whether it is closed."""
    with _opened(make) as backend:
        backend.create_run(_running())
        assert backend.streams("run-1") == [] and _values(backend, "tokens") == []
        for index, data in enumerate([b"ja", b"jb", b"jc"]):
            assert backend.write_stream("run-1", 1, "tokens", data, seq=None) == index
        assert backend.write_stream("run-1", 1, "progress", b"j1", seq=None) == 0
        assert _values(backend, "tokens") == [(0, b"ja"), (1, b"jb"), (2, b"jc")]
        assert _values(backend, "tokens", 2) == [(2, b"jc")] and _values(backend, "tokens", 3) == []
        page = backend.read_stream("run-1", "tokens", 1, limit=1)
        assert [item.offset for item in page] == [1], "at most limit items"
        assert page[0].written_at > 0 and not page[0].closed
        assert backend.write_stream("run-1", 1, "tokens", None, seq=None) == 3
        assert _values(backend, "tokens", 3) == [(3, None)], "the close marker is an item"
        assert backend.read_stream("run-1", "tokens", 3, limit=5)[0].closed
        _refused(
            lambda: backend.write_stream("run-1", 1, "tokens", b"jd", seq=None),
            InvalidValue,
            "a value after the close marker raises InvalidValue",
        )
        assert backend.write_stream("run-1", 1, "tokens", None, seq=None) == 3, "closed once"
        assert len(_values(backend, "tokens")) == 4, "nothing written after the close"
        info = [(s.name, s.length, s.closed) for s in backend.streams("run-1")]
        assert info == [("progress", 1, False), ("tokens", 3, True)], info


def check_stream_numbered_writes_are_stored_once(make: MakeBackend) -> None:
    """A workflow's write numbered seq is stored once: written again (a replay, a retry
    of a write whose acknowledgement was lost) it returns its offset and writes nothing;
    stream_writes counts the numbered writes stored (0 if they have a gap); unnumbered
    (task) writes mix in."""
    with _opened(make) as backend:
        backend.create_run(_running())
        assert backend.stream_writes("run-1", "log") == 0
        assert backend.write_stream("run-1", 1, "log", b"j0", seq=0) == 0
        assert backend.write_stream("run-1", 1, "log", b"jtask", seq=None) == 1
        assert backend.write_stream("run-1", 1, "log", b"j1", seq=1) == 2
        assert backend.write_stream("run-1", 1, "log", b"jother", seq=0) == 0, "replayed"
        assert backend.write_stream("run-1", 1, "log", b"j1", seq=1) == 2
        assert _values(backend, "log") == [(0, b"j0"), (1, b"jtask"), (2, b"j1")]
        assert backend.stream_writes("run-1", "log") == 2
        assert backend.write_stream("run-1", 1, "log", None, seq=2) == 3
        assert backend.write_stream("run-1", 1, "log", b"j0", seq=0) == 0, "replayed after close"
        assert backend.write_stream("run-1", 1, "log", None, seq=2) == 3
        assert backend.stream_writes("run-1", "log") == 3
        assert backend.stream_writes("run-1", "other") == 0
        backend.write_stream("run-1", 1, "gap", b"j0", seq=0)
        backend.write_stream("run-1", 1, "gap", b"j2", seq=2)
        assert backend.stream_writes("run-1", "gap") == 0, "not 0..2: write 1 is missing"


def check_stream_writes_are_fenced(make: MakeBackend) -> None:
    """Only the run's owner at its epoch, while it is RUNNING, writes: a stale epoch, an
    unknown run and a finished run raise LeaseLost and write nothing."""
    with _opened(make) as backend:
        backend.create_run(_running())
        backend.write_stream("run-1", 1, "s", b"j0", seq=None)
        _refused(
            lambda: backend.write_stream("run-1", 2, "s", b"j1", seq=None),
            LeaseLost,
            "a stale epoch raises LeaseLost",
        )
        _refused(
            lambda: backend.write_stream("nobody", 1, "s", b"j1", seq=0),
            LeaseLost,
            "an unknown run raises LeaseLost",
        )
        backend.finish_run("run-1", 1, RunStatus.COMPLETED, output=b"j1")
        _refused(
            lambda: backend.write_stream("run-1", 1, "s", None, seq=None),
            LeaseLost,
            "a finished run's streams take nothing more",
        )
        assert _values(backend, "s") == [(0, b"j0")]


def check_stream_writers_take_turns(make: MakeBackend) -> None:
    """Concurrent writers to one stream (parallel task bodies) get distinct offsets
    0..n-1, each value stored once."""
    with _opened(make) as backend:
        backend.create_run(_running())
        offsets = _race(8, lambda i: backend.write_stream("run-1", 1, "s", b"j%d" % i, seq=None))
        assert sorted(offsets) == list(range(8)), offsets
        stored = _values(backend, "s")
        assert sorted(data or b"" for _, data in stored) == sorted(b"j%d" % i for i in range(8))
        assert dict(stored) == {offset: b"j%d" % i for i, offset in enumerate(offsets)}


def check_stream_write_wakes_watchers(make: MakeBackend) -> None:
    """A watch on stream:<run id> made before a write sees it (a write between a
    reader's read and its wait is not lost)."""
    with _opened(make) as backend:
        backend.create_run(_running())
        watch = backend.watch([TOPIC])
        backend.write_stream("run-1", 1, "s", b"j0", seq=None)
        assert watch.wait(5), "the write made before the wait is seen"


def check_streams_are_purged_with_their_run(make: MakeBackend) -> None:
    """Purging a run deletes its streams."""
    with _opened(make) as backend:
        backend.create_run(_running())
        backend.write_stream("run-1", 1, "s", b"j0", seq=0)
        backend.finish_run("run-1", 1, RunStatus.COMPLETED, output=b"j1")
        assert backend.purge(finished_before=backend.now() + 1, limit=10) == 1
        assert backend.streams("run-1") == [] and _values(backend, "s") == []
        assert backend.stream_writes("run-1", "s") == 0
