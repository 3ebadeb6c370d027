"""Where each key of a flow file is written, so that an error can name its line.

`tomllib` gives values without positions. A flow file is small and regular (table
headers, then ``key = value`` lines), so one pass over its lines finds the line of every
header and of every key written at the start of a line. Keys inside an inline table or
an array are not found on their own: a key that is not found takes the line of the
nearest enclosing key that is (``retry = { attempts = 0 }`` names the ``retry`` line),
and a key in no known place has no line. It is a best effort for messages only: the
values themselves always come from `tomllib`.
"""

from __future__ import annotations

import re
import tomllib

from durable.errors import FlowFileError

Path = tuple[str, ...]

# A bare key, or a quoted one (its escapes are decoded by tomllib when met).
_KEY_PART = re.compile(r"""\s*(?:([A-Za-z0-9_-]+)|("(?:[^"\\]|\\.)*")|('[^']*'))\s*""")
_BARE = re.compile(r"[A-Za-z0-9_-]+")


class Places:
    """The lines of a flow file's keys, and errors that name them.

    Args:
        source: the file's name as messages show it.
        text: its text, or None when there is none (a spec built in code).
    """

    def __init__(self, source: str, text: str | None = None) -> None:
        self.source = source
        self._text = text
        self._lines: dict[Path, int] | None = None

    def line(self, path: Path) -> int | None:
        """The line *path* is written on, or that of its nearest enclosing key found."""
        if self._lines is None:  # scanned on the first error only: a good file never is
            self._lines = _scan(self._text) if self._text else {}
        for end in range(len(path), 0, -1):
            found = self._lines.get(path[:end])
            if found is not None:
                return found
        return None

    def error(self, path: Path, problem: str, *, line: int | None = None) -> FlowFileError:
        """A `FlowFileError` for *path* (empty: the file as a whole), to raise; at
        *line* when the caller knows it better."""
        line = line if line is not None else self.line(path)
        key = dotted(path) if path else None
        where = self.source if line is None else f"{self.source}:{line}"
        message = f"{where}: {key}: {problem}" if key else f"{where}: {problem}"
        return FlowFileError(message, source=self.source, line=line, key=key)


def dotted(path: Path) -> str:
    """*path* as TOML writes it: ``task.unit.depends_on``, quoting parts that need it."""
    return ".".join(part if _BARE.fullmatch(part) else f'"{part}"' for part in path)


def _scan(text: str) -> dict[Path, int]:
    """The first line (1-based) of each table header and ``key =`` in *text*."""
    found: dict[Path, int] = {}
    table: Path = ()
    quotes: str | None = None  # the delimiter of the multi-line string we are in
    for number, raw in enumerate(text.splitlines(), start=1):
        if quotes is not None:
            if raw.count(quotes) % 2 == 1:
                quotes = None
            continue
        line = raw.strip()
        if line.startswith("["):
            header = _header(line)
            if header is not None:
                table = header
                found.setdefault(table, number)
        else:
            key = _key(line)
            if key is not None:
                found.setdefault(table + key, number)
        quotes = _opens_multiline(raw)
    return found


def _header(line: str) -> Path | None:
    """The path of a ``[table]`` or ``[[array]]`` header line, or None."""
    inner = line.lstrip("[")
    parsed = _dotted_key(inner)
    if parsed is None:
        return None
    path, rest = parsed
    return path if rest.startswith("]") else None


def _key(line: str) -> Path | None:
    """The dotted key at the start of a ``key = value`` line, or None."""
    parsed = _dotted_key(line)
    if parsed is None:
        return None
    path, rest = parsed
    return path if rest.startswith("=") else None


def _dotted_key(text: str) -> tuple[Path, str] | None:
    """A dotted key read from the start of *text*, and what follows it."""
    parts: list[str] = []
    position = 0
    while True:
        match = _KEY_PART.match(text, position)
        if match is None or match.end() == position:
            return None
        bare, basic, literal = match.groups()
        if bare is not None:
            parts.append(bare)
        elif literal is not None:
            parts.append(literal[1:-1])
        else:
            parts.append(_decode_basic(basic))
        position = match.end()
        if not text.startswith(".", position):
            return tuple(parts), text[position:]
        position += 1


def _decode_basic(quoted: str) -> str:
    """A double-quoted key's text, its escapes decoded the way TOML decodes them."""
    if "\\" not in quoted:
        return quoted[1:-1]
    try:
        return str(next(iter(tomllib.loads(f"{quoted} = 0"))))
    except tomllib.TOMLDecodeError:
        return quoted[1:-1]


def _opens_multiline(raw: str) -> str | None:
    """The delimiter of a multi-line string that *raw* opens and leaves open, if any."""
    for delimiter in ('"""', "'''"):
        if raw.count(delimiter) % 2 == 1:
            return delimiter
    return None
