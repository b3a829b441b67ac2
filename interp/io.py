"""The toolkit's one way to write files, its one strict reader of a user's CSV, and its one way to
format numbers and markdown tables.

- ``atomic_write(path, data)``: text or bytes through a temporary file in the same folder and
  ``os.replace``: a reader sees the old file or the new one, never half of one.
- ``atomic_save(path, save)``: the same for writers that want a path (``fig.savefig``,
  ``safetensors.save_file``, ``DataFrame.to_csv``).
- ``atomic_dir(path)``: a whole folder built in a temporary sibling and swapped in at the end.
- ``output_dir(path, owned)``: a command's output set: ``--out`` checked first (``check_out``),
  one writer at a time (``output_lock``), files built in a temporary sibling and swapped in as a
  set, replacing only the entries the command owns (``staged_dir``).
- ``read_csv_rows(path)``: a user's CSV file, strictly (UTF-8, a header, no ragged rows), with
  one-line errors naming the file and line.
- ``fmt(x)`` and ``md_table(df)``: numbers and tables for the markdown reports.

Imports nothing heavy (no torch, no pandas at import time).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import math
import numbers
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas and matplotlib are imported by the callers that pass them
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = [
    "atomic_write",
    "atomic_save",
    "atomic_dir",
    "OutputError",
    "check_out",
    "output_lock",
    "staged_dir",
    "output_dir",
    "sha256_file",
    "read_csv_rows",
    "decode_text",
    "fmt",
    "md_table",
    "png_bytes",
]

PathLike = str | os.PathLike


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_save(path: PathLike, save: Callable[[Path], Any]) -> Path:
    """Call ``save(tmp)`` with a temporary path in ``path``'s folder (same suffix, so writers that
    look at it pick the right format), then ``os.replace`` it onto ``path``. On any exception the
    temporary file is removed and ``path`` is left as it was. Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; an output is an ordinary file
        save(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def atomic_write(path: PathLike, data: str | bytes) -> Path:
    """Write ``data`` (str as UTF-8, or bytes) to ``path`` atomically. Returns ``path``."""
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return atomic_save(path, lambda tmp: tmp.write_bytes(payload))


@contextlib.contextmanager
def atomic_dir(path: PathLike, replace: bool = True) -> Iterator[Path]:
    """Build a folder under a temporary sibling name and swap it in as ``path`` when the block
    ends without an exception (the previous folder, if any, is removed only after the new one is in
    place); on an exception the temporary folder is removed and ``path`` is untouched.
    ``replace=False`` is for caches that any writer may fill: if ``path`` exists when the block
    ends (another process finished first), it is kept and the new folder discarded.

    >>> with atomic_dir("out/ckpt") as tmp:
    ...     (tmp / "model.safetensors").write_bytes(...)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        yield tmp
        if not replace and path.exists():
            shutil.rmtree(tmp, ignore_errors=True)
            return
        old: Path | None = None
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.replace(path, old / path.name)
        try:
            os.replace(tmp, path)
        except OSError:
            if replace or not path.exists():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another writer of the cache won the race
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# --------------------------------------------------------------------------------------------------
# Output sets


class OutputError(Exception):
    """An output folder that cannot be used: a file, unwritable, a name too long, or being written
    by another run. The message is one line and names the folder."""


def _side_name(path: Path, tag: str) -> str:
    """A hidden sibling name for ``path`` (``.NAME.TAG``) that stays within NAME_MAX however
    long ``path``'s own name is."""
    name = path.name
    if len(os.fsencode(name)) > 80:
        name = name[:40] + "-" + hashlib.sha1(os.fsencode(name)).hexdigest()[:12]
    return f".{name}.{tag}"


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:  # missing, or a name too long to look up
        return None


def check_out(path: str | os.PathLike, what: str = "output folder", must_exist: bool = False) -> Path:
    """Make sure ``path`` can be an output folder, before any work: not a file (nor under one),
    names and the whole path within the system's limits, and writable. Creates it (and its
    parents) if missing, unless ``must_exist`` (a folder that is read too). Raises ``OutputError``
    with a one-line message naming ``what`` and the path; returns the path."""
    path = Path(path)
    label = f"{what} {path}"
    full = os.fsencode(os.path.abspath(path))
    anchor = path.absolute()
    while _stat(anchor) is None and anchor != anchor.parent:  # the nearest existing ancestor
        anchor = anchor.parent
    if not os.path.isdir(anchor):
        where = "" if anchor == path.absolute() else f" ({anchor} is a file)"
        raise OutputError(f"{label}: is a file, not a folder{where}; expected a folder (or a path to create one)")
    try:
        name_max = os.pathconf(anchor, "PC_NAME_MAX")
        path_max = os.pathconf(anchor, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):
        name_max, path_max = 255, 4096
    short = label if len(label) <= 120 else label[:100] + "..." + label[-17:]
    longest = max((len(os.fsencode(p)) for p in path.absolute().parts), default=0)
    if longest > name_max:
        raise OutputError(f"{short}: a name in it is too long ({longest} bytes; at most {name_max} here)")
    if len(full) > path_max - 64:  # room for the names of the files written inside
        raise OutputError(f"{short}: the path is too long ({len(full)} bytes; at most {path_max - 64} here)")
    if must_exist and not path.is_dir():
        raise OutputError(f"{label}: no such folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(f"{label}: is a file, not a folder; expected a folder") from None
    except OSError as e:
        raise OutputError(f"{label}: cannot create it ({e.strerror or e})") from None
    for folder in (path, path.parent):
        if not os.access(folder, os.W_OK | os.X_OK):
            raise OutputError(f"{label}: {folder} is not writable")
    return path


def _leftovers(path: Path) -> list[Path]:
    # mkdtemp's 8 random characters between the prefix and the suffix: not another folder's leftovers
    own = re.compile(re.escape(_side_name(path, "")) + r"[a-z0-9_]{8}\.interp-(new|old)")
    return [path.parent / name for name in os.listdir(path.parent) if own.fullmatch(name)]


@contextlib.contextmanager
def output_lock(path: str | os.PathLike, command: str = "interp") -> Iterator[Path]:
    """Hold the one-writer lock of output folder ``path`` for the block: ``fcntl.flock`` on a
    hidden sibling ``.NAME.interp-lock`` that records who holds it. The kernel drops the lock
    when its holder exits, however it exits, so a crashed or killed run never leaves it stuck.
    A second writer gets ``OutputError`` at once (no waiting). Staging folders that a killed run
    left beside ``path`` are removed once the lock is held. The lock file is removed on exit."""
    import fcntl

    shown, path = Path(path), Path(os.path.realpath(path))  # "out/", ".", a link: one folder, one lock
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.parent / _side_name(path, "interp-lock")
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise OutputError(f"output folder {shown}: cannot create its lock file {lock} ({e.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise OutputError(f"output folder {shown}: cannot lock {lock} ({e.strerror})") from None
            raise OutputError(
                f"{shown} is being written by another run ({holder}); wait for it to end or choose another folder"
            ) from None
        try:  # the holder before us may have removed the file between our open and our lock
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {command}, since {stamp}\n".encode(), 0)
        for p in _leftovers(path):  # no live writer can own these: we hold the lock
            shutil.rmtree(p, ignore_errors=True)
        yield shown
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)  # releases the lock


def _owned(name: str, owned: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in owned)


@contextlib.contextmanager
def staged_dir(
    path: str | os.PathLike, owned: Sequence[str], command: str = "this command", strict: bool = True
) -> Iterator[Path]:
    """Build an output set in a temporary sibling folder and commit it into ``path`` when the
    block ends without an exception. ``owned``: names or glob patterns (``pattern_*.png``) of the
    entries in ``path`` that belong to this output set; every entry written must match one
    (``strict=False``: an entry written that matches none is owned too, for writers such as a
    tokenizer's ``save_pretrained`` whose file names are not all known in advance).

    The commit moves the previous owned entries aside, moves the new ones in (renames, within one
    file system), then deletes the previous ones; if a rename fails, the ones done are undone, so
    ``path`` holds the whole previous set or the whole new one. Entries that are not owned (other
    commands' files and folders, a user's notes) are never touched. On an exception in the block
    (an interrupt included) the staging folder is removed and ``path`` is left as it was."""
    path = Path(os.path.realpath(path))  # the staging folder is a sibling of the real folder
    path.parent.mkdir(parents=True, exist_ok=True)
    stem = _side_name(path, "")
    tmp = Path(tempfile.mkdtemp(prefix=stem, suffix=".interp-new", dir=path.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        yield tmp
        new = sorted(p.name for p in tmp.iterdir())
        foreign = [n for n in new if not _owned(n, owned)]
        if not strict:
            owned, foreign = [*owned, *foreign], []
        if foreign:
            raise ValueError(f"{command} wrote {foreign}, not among the files it owns in {path} ({list(owned)})")
        path.mkdir(parents=True, exist_ok=True)
        old = Path(tempfile.mkdtemp(prefix=stem, suffix=".interp-old", dir=path.parent))
        previous = sorted(p.name for p in path.iterdir() if _owned(p.name, owned))
        moved_old: list[str] = []
        moved_new: list[str] = []
        try:
            for name in previous:
                os.replace(path / name, old / name)
                moved_old.append(name)
            for name in new:
                os.replace(tmp / name, path / name)
                moved_new.append(name)
        except BaseException:
            for name in reversed(moved_new):
                with contextlib.suppress(OSError):
                    os.replace(path / name, tmp / name)
            for name in reversed(moved_old):
                with contextlib.suppress(OSError):
                    os.replace(old / name, path / name)
            shutil.rmtree(old, ignore_errors=True)
            raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def output_dir(
    path: str | os.PathLike,
    owned: Sequence[str],
    command: str = "interp",
    what: str = "output folder",
    must_exist: bool = False,
) -> Iterator[Path]:
    """A command's output folder: ``check_out`` (fails at once on a file, an unwritable place, a
    name too long), then ``output_lock`` (one writer at a time), then ``staged_dir`` (the block
    writes into a temporary sibling; the owned entries of ``path`` are replaced as a set when it
    ends). Enter it before the work, so a bad folder fails in the first second.

    >>> with output_dir("out/minilm", owned=["heads.csv", "report.md", "pattern_*.png"]) as tmp:
    ...     (tmp / "heads.csv").write_text(...)
    """
    path = check_out(path, what, must_exist)
    with output_lock(path, command), staged_dir(path, owned, command) as tmp:
        yield tmp


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


def fmt(x: Any, digits: int = 3, fixed: bool = False) -> str:
    """A number as a report shows it: "" for None and NaN; ``fixed``: ``digits`` decimals (scores,
    accuracies); otherwise ``digits`` significant digits, in scientific notation below 1e-3 and
    from 1e4 on (errors, tolerances, p-values). Anything else is ``str(x)``."""
    if x is None:
        return ""
    if isinstance(x, numbers.Integral) or not isinstance(x, numbers.Real):  # ints, bools, strings
        return str(x)
    v = float(x)
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if fixed:
        return f"{v:.{digits}f}"
    if v == 0 or 1e-3 <= abs(v) < 1e4:
        return f"{v:.{digits}g}"
    return f"{v:.{max(digits - 1, 0)}e}"


def md_table(df: pd.DataFrame, columns: Sequence[str] | None = None, empty: str = "_(none)_", digits: int = 3) -> str:
    """A pandas DataFrame as a GitHub markdown table: numbers through ``fmt``, ``|`` escaped.
    ``columns`` picks and orders the columns (default: all). ``empty`` is returned for no rows."""
    cols = list(df.columns) if columns is None else list(columns)
    if len(df) == 0:
        return empty + "\n"
    lines = ["| " + " | ".join(str(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for row in df[cols].itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v, digits).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines) + "\n"


def png_bytes(fig: Figure, dpi: int = 90, **savefig_kwargs: Any) -> bytes:
    """A matplotlib figure as PNG bytes; the figure is closed."""
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, **savefig_kwargs)
    plt.close(fig)
    return buf.getvalue()
