"""Bounded reads of a command's output log: its tail, or its head and tail with a note
of what was left out between them.

The command writes its log directly and without limit (the engine may be dead while it
runs), so a reader never loads the whole file: it seeks and reads at most the bytes it
keeps. Cuts fall on UTF-8 character boundaries, so a multibyte character is never
split into two replacement characters; the bytes of a character cut in half count as
left out.
"""

from __future__ import annotations

import os
from pathlib import Path

_CONTINUATION = 0b1000_0000  # the top bits of a UTF-8 continuation byte (10xx xxxx)
_MAX_CHAR = 4  # the longest UTF-8 encoding of a character


def tail(path: Path, limit: int) -> tuple[str, int]:
    """The last *limit* bytes (at most) of the file at *path*, decoded, and how many
    bytes came before them; ``("", 0)`` when there is no file yet.

    Raises:
        ValueError: *limit* is negative.
    """
    _check_limit("limit", limit, minimum=0)
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            start = max(0, size - limit)
            file.seek(start)
            data = file.read(size - start)
    except FileNotFoundError:
        return "", 0
    skip = _partial_head(data) if start else 0
    return _decode(data[skip:]), start + skip


def capped(path: Path, limit: int) -> tuple[str, int, int]:
    """The file at *path* decoded and capped at about *limit* bytes: the whole of it
    when it fits, else its first quarter, a line ``[... N bytes dropped ...]`` and its
    last three quarters. Returns the text, the file's size and the bytes dropped;
    ``("", 0, 0)`` when there is no file yet.

    Raises:
        ValueError: *limit* is less than 1.
    """
    _check_limit("log_limit", limit, minimum=1)
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size <= limit:
                return _decode(file.read(size)), size, 0
            head = file.read(limit // 4)
            file.seek(size - (limit - len(head)))
            end = file.read(limit - len(head))
    except FileNotFoundError:
        return "", 0, 0
    head = head[: len(head) - _partial_tail(head)]
    end = end[_partial_head(end) :]
    dropped = size - len(head) - len(end)
    text = _decode(head)
    if text and not text.endswith("\n"):
        text += "\n"
    return f"{text}[... {dropped} bytes dropped ...]\n{_decode(end)}", size, dropped


def _decode(data: bytes) -> str:
    """Bytes as text; what is not UTF-8 becomes U+FFFD rather than an error, since a
    command may write anything."""
    return data.decode("utf-8", errors="replace")


def _partial_head(data: bytes) -> int:
    """How many bytes at the start of *data* are the rest of a character cut off
    before it (continuation bytes, at most three)."""
    count = 0
    while count < min(len(data), _MAX_CHAR - 1) and data[count] & 0xC0 == _CONTINUATION:
        count += 1
    return count


def _partial_tail(data: bytes) -> int:
    """How many bytes at the end of *data* begin a character whose rest was cut off."""
    for back in range(1, min(len(data), _MAX_CHAR) + 1):
        byte = data[-back]
        if byte & 0xC0 == _CONTINUATION:
            continue
        if byte < 0xC0:
            return 0  # ASCII (or a stray byte): nothing is cut
        needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
        return back if back < needed else 0
    return 0


def _check_limit(name: str, value: int, *, minimum: int) -> None:
    """Refuse a limit below *minimum* with a message that names the argument."""
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum} byte(s), got {value}")
