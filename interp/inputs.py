"""A user's input files, read strictly (re-exported by ``interp.io``, the toolkit's one place for files):

- ``readable_input(path, what)``: a regular file or a pipe, else one line naming ``what`` and the path.
- ``decode_text(raw, path)``: UTF-8, or one line naming the file, line and column.
- ``read_csv_rows(path)``: a user's CSV file (UTF-8, a header, no ragged rows), one-line errors naming
  the file and line.

Imports nothing heavy.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["readable_input", "decode_text", "read_csv_rows"]


def readable_input(
    path: str | os.PathLike, what: str, expected: str = "", pipe: bool = True, max_bytes: int | None = None
) -> Path:
    """``path`` as a Path if it can be read once as a stream: a regular file, or a pipe (bash's
    ``<(...)`` hands in /dev/fd/N). The one check every input file goes through (--conllu, --text,
    --labels, --config, a model folder's files): a missing path is a FileNotFoundError, a folder an
    IsADirectoryError, and anything else (a device such as /dev/zero, which would never end) a
    ValueError, each naming ``what``, the path and, when given, ``expected`` (what would be right).
    ``pipe=False``: a pipe is refused too (a model folder's files); ``max_bytes``: a larger file is."""
    path = Path(path)
    hint = f" (expected {expected})" if expected else ""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} not found: {path}{hint}") from None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{what} is a folder, not a file: {path}{hint}")
    if not (stat.S_ISREG(st.st_mode) or (pipe and stat.S_ISFIFO(st.st_mode))):
        raise ValueError(f"{what} is not a regular file{' or a pipe' if pipe else ''}: {path}{hint}")
    if max_bytes is not None and st.st_size > max_bytes:
        raise ValueError(f"{what} is {st.st_size:,} bytes, more than the {max_bytes:,} allowed: {path}{hint}")
    return path


def decode_text(raw: bytes, path: str | os.PathLike, expected: str = "a UTF-8 text file") -> str:
    """``raw`` decoded as UTF-8 (a byte-order mark is dropped). Bytes that are not UTF-8 raise one
    ValueError naming the file, the line and the column, and what was ``expected``."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise ValueError(
            f"{path}:{line}: is not UTF-8 (byte 0x{raw[e.start]:02x} at column {col}); expected {expected}"
        ) from None


def read_csv_rows(path: str | os.PathLike, data: bytes | None = None) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """A user's CSV file, read strictly: UTF-8 (a byte-order mark is fine), a header line, then
    rows of exactly as many fields; blank lines are skipped. ``data``: the file's bytes, if already
    read. Returns (header, [(line number, fields)]). Raises ValueError with one line naming the file
    (and line) for an empty file, a binary one, bytes that are not UTF-8, a row with too many or too
    few fields, or broken quoting."""
    import csv
    import io

    raw = Path(path).read_bytes() if data is None else data
    if not raw.strip():
        raise ValueError(f"{path}: is empty; expected a CSV file: a header line, then one line per row")
    if b"\x00" in raw:
        raise ValueError(f"{path}: is not a CSV text file (it holds NUL bytes: binary data?)")
    text = decode_text(raw, path, "a UTF-8 CSV file")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    try:
        for fields in reader:
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # a blank line
            if header is None:
                header = [f.strip() for f in fields]
                dup = sorted({h for h in header if header.count(h) > 1})
                if dup:
                    raise ValueError(f"{path}:{reader.line_num}: column {dup[0]!r} appears twice in the header")
                continue
            if len(fields) != len(header):
                raise ValueError(
                    f"{path}:{reader.line_num}: {len(fields)} fields, expected {len(header)} "
                    f"(as many as the header: {','.join(header)})"
                )
            rows.append((reader.line_num, fields))
    except csv.Error as e:
        raise ValueError(f"{path}:{reader.line_num}: not valid CSV ({e})") from None
    return header or [], rows
