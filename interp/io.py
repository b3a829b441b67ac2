"""The toolkit's one way to write files and its one strict reader of a user's CSV (numbers, markdown
tables and figures for the reports are formatted by ``interp.display``).

- ``atomic_write(path, data)``: text or bytes through a temporary file in the same folder and
  ``os.replace``: a reader sees the old file or the new one, never half of one.
- ``atomic_save(path, save)``: the same for writers that want a path (``fig.savefig``,
  ``safetensors.save_file``, ``DataFrame.to_csv``).
- ``atomic_dir(path)``: a whole folder built in a temporary sibling and swapped in at the end.
- ``output_dir(path, owned)``: a command's output set: ``--out`` checked first (``check_out``),
  one writer at a time (``output_lock``), files built in a staging folder inside it and swapped in
  as a set, replacing only entries that a toolkit run wrote there, as its manifest
  (``.interp-manifest.json``) records (``staged_dir``); opened again on its own staging folder, it
  writes there (a command opens the set before its work, the library's ``write`` opens it again).
- ``write_set(folder, owned, write_files)``: every analysis's ``write(result, folder)`` in one line.
- ``read_csv_rows(path)``, ``readable_input``, ``decode_text``: a user's input files, read strictly
  (``interp.inputs``, re-exported here).

Imports nothing heavy (no torch, no pandas at import time).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from interp.inputs import decode_text, read_csv_rows, readable_input  # the readers of a user's files

__all__ = [
    "readable_input",
    "atomic_write",
    "atomic_save",
    "atomic_dir",
    "OutputError",
    "check_out",
    "output_lock",
    "staged_dir",
    "output_dir",
    "undo_created",
    "write_set",
    "committed_sets",
    "check_recorded",
    "MANIFEST",
    "sha256_file",
    "read_csv_rows",
    "decode_text",
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
        save(Path(tmp))
        # mkstemp makes 0600 (and some writers, safetensors', recreate the file 0600): an output is
        # an ordinary file, with the mode a plain open would give it under the umask
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno is not None and not e.filename:  # a full disk: say where
            raise OSError(e.errno, f"{e.strerror or os.strerror(e.errno)} (writing {path})") from None
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
    """An output folder that cannot be used: a file, unwritable, a name too long, being written by
    another run, or holding files no toolkit run wrote. The message is one line and names the folder."""


MANIFEST = ".interp-manifest.json"  # inside an output folder: the names toolkit runs wrote there
_NEW, _OLD = ".interp-new.", ".interp-old."  # staging and backup folders, inside the output folder
_JOURNAL = ".interp-journal.json"  # inside a backup folder: what the commit moves, to undo it after a kill
_COMMITTED: list[Path] = []  # output folders whose new set this process has committed, in order


def committed_sets() -> list[Path]:
    """The output folders whose new set this process has committed so far (oldest first): the CLI
    says which were written when a signal stops a command after a commit."""
    return list(_COMMITTED)


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


def _lexists(path: Path) -> bool:
    return os.path.lexists(path)


def check_out(path: str | os.PathLike, what: str = "output folder", must_exist: bool = False) -> Path:
    """Make sure ``path`` can be an output folder, before any work: not a file (nor under one),
    not a dangling link, names and the whole path within the system's limits, and writable.
    Creates it (and its parents) if missing, unless ``must_exist`` (a folder that is read too).
    Raises ``OutputError`` with a one-line message naming ``what`` and the path; returns the path."""
    path = Path(path)
    label = f"{what} {path}"
    if os.path.islink(path) and not path.exists():
        raise OutputError(
            f"{label}: is a symbolic link to {os.readlink(path)}, which does not exist; "
            "create the folder it points to, or choose another folder"
        )
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


def _open_regular(path: Path, flags: int, what: str) -> int:
    """``os.open`` that never follows a symbolic link and refuses anything but a regular file (a
    FIFO, a device, a folder planted under one of the toolkit's own names)."""
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OutputError(
                f"{what} {path} is a symbolic link; the toolkit never follows one there: remove it"
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OutputError(f"{what} {path} is not a regular file; remove it")
    return fd


def _read_json(path: Path, what: str) -> Any:
    """A JSON file the toolkit wrote (a manifest, a journal), or None if there is none."""
    import json

    try:
        fd = _open_regular(path, os.O_RDONLY, what)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        raw = f.read()
    try:
        return json.loads(raw)
    except ValueError:
        raise OutputError(
            f"{what} {path} is not valid JSON; the toolkit wrote it, so it was damaged: remove it"
        ) from None


def _recorded(path: Path) -> dict[str, str] | None:
    """{name: command} of what toolkit runs wrote in ``path`` (its manifest); None: no manifest."""
    data = _read_json(path / MANIFEST, "manifest")
    if data is None:
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise OutputError(f"manifest {path / MANIFEST} lists no files; remove it")
    return {str(k): str(v) for k, v in files.items() if _plain_name(str(k))}


def _plain_name(name: str) -> bool:
    return name not in ("", ".", "..") and "/" not in name and "\0" not in name


def _toolkit_name(name: str) -> bool:
    return name == MANIFEST or name.startswith((_NEW, _OLD))


def _unrecorded_claims(path: Path, owned: Sequence[str]) -> list[str]:
    """Entries of ``path`` that this command would replace although no manifest records a toolkit
    run writing them: a folder without a manifest (a user's, or an older version's output) holding
    entries of this command's names or patterns."""
    if not path.is_dir() or _recorded(path) is not None:
        return []
    return sorted(n for n in os.listdir(path) if not _toolkit_name(n) and _owned(n, owned))


def check_recorded(
    path: str | os.PathLike,
    owned: Sequence[str],
    command: str = "this command",
    force: bool = False,
    hint: str = "pass --force",
    owner: str | None = None,
) -> None:
    """Refuse (``OutputError``, one line) a folder without a manifest that holds entries of this
    command's names or patterns (a user's ``report.md``, an older version's output), and a folder
    whose manifest records another command writing one of them (``interp probe``'s ``report.md``
    where ``interp circuit`` writes its own), unless ``force``. ``owner``: the command the names are
    recorded under (default ``command``; ``interp summary`` re-renders ``interp probe``'s
    report.html as the probe's own): entries recorded under it or ``command`` are this command's.
    ``staged_dir`` calls it; a command that stages later (``interp train``: its first checkpoint)
    calls it before the work. ``hint``: how the caller's user says "replace them"."""
    path = Path(os.path.realpath(path))
    if force:
        return
    claims = _unrecorded_claims(path, owned)
    if claims:
        raise _refuse_unrecorded(path, claims, command, hint)
    mine = {command, owner or command}
    others = sorted(
        (n, c) for n, c in (_recorded(path) or {}).items() if c not in mine and _owned(n, owned) and _lexists(path / n)
    )
    if others:
        shown = ", ".join(f"{n} (written by {c})" for n, c in others[:4])
        more = f" and {len(others) - 4} more" if len(others) > 4 else ""
        raise OutputError(
            f"{path} holds {shown}{more}, another command's output, which {command} would replace; "
            f"choose another folder, or {hint} to replace it"
        )


def _refuse_unrecorded(path: Path, names: Sequence[str], command: str, hint: str = "pass --force") -> OutputError:
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return OutputError(
        f"{path} holds {shown}, which {command} would replace, but no toolkit run recorded writing them "
        f"(no {MANIFEST} lists them); move them away, choose another folder, or {hint} to replace them"
    )


def _leftovers(path: Path) -> list[Path]:
    # staging folders of older versions, beside the folder; mkdtemp's 8 random characters between
    # the prefix and the suffix: not another folder's leftovers. (Their backups, `-old`, are kept.)
    own = re.compile(re.escape(_side_name(path, "")) + r"[a-z0-9_]{8}\.interp-new")
    return [path.parent / name for name in os.listdir(path.parent) if own.fullmatch(name)]


def _undo(path: Path, tmp: Path, old: Path, moved_old: Sequence[str], moved_new: Sequence[str]) -> None:
    """Put a commit's renames back: the new entries into ``tmp``, the previous ones into ``path``.
    A name is recorded before its rename, so each is checked where it actually is."""
    if moved_new:
        tmp.mkdir(exist_ok=True)  # after a kill it may be gone: the new entries still leave path
    for name in reversed(moved_new):
        if _lexists(path / name) and not _lexists(tmp / name):
            os.replace(path / name, tmp / name)
    for name in reversed(moved_old):
        if _lexists(old / name):
            os.replace(old / name, path / name)
    shutil.rmtree(old, ignore_errors=True)


def _manifest_names(data: Any, commit: str | None = None) -> set[str]:
    """The names a manifest's data records (of commit ``commit``, if given); none if it is not one."""
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or (commit is not None and data.get("commit") != commit):
        return set()
    return {k for k in files if isinstance(k, str) and _plain_name(k)}


def _damaged_journal(path: Path, old: Path, why: str) -> OutputError:
    return OutputError(
        f"commit journal {old / _JOURNAL} is damaged ({why}); nothing was undone: move the files in "
        f"{old} back into {path} by hand and remove {old}"
    )


def _journal_plan(path: Path, old: Path, journal: dict, manifest: Any) -> tuple[Path, list[str], list[str]]:
    """The staging folder and the (old, new) names of a commit ``journal`` that did not finish,
    checked before anything moves: lists of plain names; a new name (moved back into the staging
    folder, then removed with it) only one the staging folder's manifest of that commit, or the
    folder's manifest, records; an old name (moved back from the backup) only into a place that is
    free once the new names are back. Anything else: the journal is damaged or planted, and
    ``OutputError`` says so before any file is moved or removed."""

    def damaged(why: str) -> OutputError:
        return _damaged_journal(path, old, why)

    commit, new_dir, olds, news = (journal.get(k) for k in ("commit", "new_dir", "old", "new"))
    if not isinstance(commit, str) or not isinstance(new_dir, str):
        raise damaged("its commit and new_dir are not strings")
    if not (new_dir.startswith(_NEW) and _plain_name(new_dir)):
        raise damaged(f"its staging folder {new_dir!r} is not one inside {path}")
    for field, names in (("old", olds), ("new", news)):
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise damaged(f"its {field!r} is not a list of names")
        if not all(_plain_name(n) for n in names):
            raise damaged(f"its {field!r} names files outside {path}")
    tmp = path / new_dir
    if _lexists(tmp) and not stat.S_ISDIR(os.lstat(tmp).st_mode):
        raise damaged(f"{tmp} is not a folder")
    staged = _read_json(tmp / MANIFEST, "manifest") if tmp.is_dir() else None
    # not the backup's own manifest: it lies in the folder the journal came with, so a planted backup
    # could name any file in it (a commit moves new names in from the staging folder, whose manifest lists them)
    known = _manifest_names(manifest)
    if _manifest_names(staged, commit):  # the set the commit was moving in: its manifest, and what it lists
        known |= _manifest_names(staged, commit) | {MANIFEST}
    moved_back = set()
    for name in news:
        if _lexists(path / name) and not _lexists(tmp / name):
            if name not in known:
                raise damaged(f"no manifest records {name!r}, which it would remove")
            moved_back.add(name)
    taken = [n for n in olds if _lexists(old / n) and _lexists(path / n) and n not in moved_back]
    if taken:
        raise damaged(f"restoring {taken[0]!r} would replace a file of that name")
    return tmp, olds, news


def _recover(path: Path) -> None:
    """Finish or undo a commit that a kill (SIGKILL, power loss) stopped, before anything is
    removed: a backup whose commit did not finish is moved back, so ``path`` holds the whole
    previous set again (``_journal_plan`` checks the journal first: a damaged or planted one moves
    nothing); then staging folders of killed runs are removed."""
    if not path.is_dir():
        return
    manifest = _read_json(path / MANIFEST, "manifest") if _lexists(path / MANIFEST) else None
    for name in sorted(n for n in os.listdir(path) if n.startswith(_OLD)):
        old = path / name
        if not stat.S_ISDIR(os.lstat(old).st_mode):
            continue  # not a folder the toolkit made: leave it
        journal = _read_json(old / _JOURNAL, "commit journal")
        if journal is None:  # killed before its journal was in place: nothing was moved yet
            if any(not n.startswith(f".{_JOURNAL}.") for n in os.listdir(old)):
                raise OutputError(
                    f"{old} holds a backup of an interrupted commit without its journal; move its files back "
                    f"into {path} by hand and remove it"
                )
            shutil.rmtree(old, ignore_errors=True)
            continue
        if not isinstance(journal, dict):
            raise _damaged_journal(path, old, "not a JSON object")
        if isinstance(manifest, dict) and manifest.get("commit") == journal.get("commit"):
            shutil.rmtree(old, ignore_errors=True)  # the commit finished: only its backup is left
        else:
            tmp, olds, news = _journal_plan(path, old, journal, manifest)
            _undo(path, tmp, old, olds, news)
    for name in os.listdir(path):
        if name.startswith(_NEW) and stat.S_ISDIR(os.lstat(path / name).st_mode):
            shutil.rmtree(path / name, ignore_errors=True)  # no live writer can own these: we hold the lock


@contextlib.contextmanager
def output_lock(path: str | os.PathLike, command: str = "interp") -> Iterator[Path]:
    """Hold the one-writer lock of output folder ``path`` for the block: ``fcntl.flock`` on a
    hidden sibling ``.NAME.interp-lock`` that records who holds it (opened without following a
    link; anything but a regular file there is refused). The kernel drops the lock when its holder
    exits, however it exits, so a crashed or killed run never leaves it stuck. A second writer gets
    ``OutputError`` at once (no waiting). Once the lock is held, a commit that a killed run left
    half done is undone (the previous set restored) and staging folders of killed runs are removed.
    The lock file is removed on exit."""
    import fcntl

    shown, path = Path(path), Path(os.path.realpath(path))  # "out/", ".", a link: one folder, one lock
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.parent / _side_name(path, "interp-lock")
    while True:
        try:
            fd = _open_regular(lock, os.O_RDWR | os.O_CREAT, f"output folder {shown}: its lock file")
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
            same = os.fstat(fd).st_ino == os.lstat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {command}, since {stamp}\n".encode(), 0)
        _recover(path)  # first: restore a backup before anything is removed
        for p in _leftovers(path):
            if stat.S_ISDIR(os.lstat(p).st_mode):
                shutil.rmtree(p, ignore_errors=True)
        yield shown
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)  # releases the lock


# staging folders of the output sets open in this process -> the names they own (``output_dir``)
_STAGING: dict[Path, tuple[str, ...]] = {}


def _owned(name: str, owned: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in owned)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block ends: a signal during a commit's renames is
    acted on once the renames (or their undoing) are done, never between two of them."""
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers run in the main thread only; a commit elsewhere keeps its undo journal
        return
    caught: list[int] = []
    saved = {}
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) is not None:
            saved[sig] = signal.signal(sig, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        if caught:
            signal.raise_signal(caught[0])  # now, with its usual handler


def _commit(
    path: Path, tmp: Path, new: Sequence[str], owned: Sequence[str], command: str, force: bool, owner: str
) -> None:
    """Swap ``tmp``'s entries into ``path`` as one set and record them in the manifest (under ``owner``)."""
    import json
    import secrets

    recorded = _recorded(path)
    previous = [n for n in (recorded or {}) if _owned(n, owned) and _lexists(path / n)]
    if force or recorded is None:  # told to, or a folder checked empty of our names at the start
        previous += [n for n in os.listdir(path) if _owned(n, owned) and n not in previous and not _toolkit_name(n)]
    collide = [n for n in new if _lexists(path / n) and n not in previous]
    if collide:  # a user's file of a name we write (a glob matched it): never replaced unasked
        raise _refuse_unrecorded(path, collide, command)
    files = {n: c for n, c in (recorded or {}).items() if n not in previous and _lexists(path / n)}
    files.update({n: owner for n in new})
    stamp = secrets.token_hex(8)
    manifest = {"written_by": "interp", "commit": stamp, "files": dict(sorted(files.items()))}
    atomic_write(tmp / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    moving_old = ([MANIFEST] if _lexists(path / MANIFEST) else []) + sorted(previous)
    moving_new = [*new, MANIFEST]  # the manifest last: the commit is done when path holds this one
    journal = {"commit": stamp, "new_dir": tmp.name, "old": moving_old, "new": moving_new}
    with _signals_held():
        old = Path(tempfile.mkdtemp(prefix=_OLD, dir=path))
        moved_old: list[str] = []
        moved_new: list[str] = []
        try:
            atomic_write(old / _JOURNAL, json.dumps(journal))  # before any rename: a kill is undone from it
            for name in moving_old:
                moved_old.append(name)  # before the rename: a signal right after it cannot lose the file
                os.replace(path / name, old / name)
            for name in moving_new:
                moved_new.append(name)
                os.replace(tmp / name, path / name)
        except BaseException:
            _undo(path, tmp, old, moved_old, moved_new)
            raise
        _COMMITTED.append(path)
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def staged_dir(
    path: str | os.PathLike,
    owned: Sequence[str],
    command: str = "this command",
    strict: bool = True,
    force: bool = False,
    owner: str | None = None,
) -> Iterator[Path]:
    """Build an output set in a hidden staging folder inside ``path`` (so on its file system, a
    mount point included) and commit it into ``path`` when the block ends without an exception.
    ``owned``: names or glob patterns (``pattern_*.png``) of this output set's entries; every entry
    written must match one (``strict=False``: an entry that matches none is owned too, for writers
    such as a tokenizer's ``save_pretrained`` whose file names are not all known in advance).

    Only what a toolkit run wrote is ever replaced or removed: ``path/.interp-manifest.json``
    (written with each set) records the names; an entry matching a pattern that no manifest
    records (a user's ``pattern_my_plot.png``) stays, and writing a name that a user's file holds
    raises ``OutputError``. A folder without a manifest that holds entries of this command's names or
    patterns (a user's ``report.md``, or an older version's output), or whose manifest records
    another command writing one (``check_recorded``; ``owner``: the command recorded, default
    ``command``), is refused before the block runs, unless ``force`` (then they are replaced as the
    previous set).

    The commit moves the previous entries aside, moves the new ones in (renames, within one file
    system), then deletes the previous ones; a failed rename or a signal undoes the ones done, so
    ``path`` holds the whole previous set or the whole new one; a kill in between is undone by the
    next run (``output_lock``). Entries not owned are never touched. On an exception in the block
    (an interrupt included) the staging folder is removed and ``path`` is left as it was."""
    path = Path(os.path.realpath(path))
    path.mkdir(parents=True, exist_ok=True)
    check_recorded(path, owned, command, force, owner=owner)
    tmp = Path(tempfile.mkdtemp(prefix=_NEW, dir=path))
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        yield tmp
        new = sorted(p.name for p in tmp.iterdir())
        foreign = [n for n in new if not _owned(n, owned) or _toolkit_name(n)]
        if not strict:
            owned, foreign = [*owned, *foreign], [n for n in foreign if _toolkit_name(n)]
        if foreign:
            raise ValueError(f"{command} wrote {foreign}, not among the files it owns in {path} ({list(owned)})")
        _commit(path, tmp, new, owned, command, force, owner or command)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def output_dir(
    path: str | os.PathLike,
    owned: Sequence[str],
    command: str = "interp",
    what: str = "output folder",
    must_exist: bool = False,
    force: bool = False,
    owner: str | None = None,
) -> Iterator[Path]:
    """A command's output folder: ``check_out`` (fails at once on a file, an unwritable place, a
    name too long), then ``output_lock`` (one writer at a time; a commit a killed run left half
    done is undone), then ``staged_dir`` (refuses a folder holding files of this command's names
    that no toolkit run, or another command's run, wrote, unless ``force``; the block writes into a
    staging folder; the owned entries of ``path`` are replaced as a set when it ends). Enter it
    before the work, so a bad folder fails in the first second. A folder it created (and its
    parents) is removed again when the block fails and leaves it empty.

    >>> with output_dir("out/minilm", owned=["heads.csv", "report.md", "pattern_*.png"]) as tmp:
    ...     (tmp / "heads.csv").write_text(...)
    """
    real = Path(os.path.realpath(path)) if os.path.isdir(path) else None
    outer = _STAGING.get(real) if real is not None else None
    if outer is not None:  # inside an open set's staging folder: write there, the outer set commits
        missing = [n for n in owned if not any(n == o or fnmatch.fnmatchcase(n, o) for o in outer)]
        if missing:
            raise ValueError(f"{command} writes {missing}, not among the files of the output set open in {path}")
        yield real
        return
    with undo_created(path):
        path = check_out(path, what, must_exist)
        with output_lock(path, command), staged_dir(path, owned, command, force=force, owner=owner) as tmp:
            _STAGING[tmp] = tuple(owned)
            try:
                yield tmp
            finally:
                _STAGING.pop(tmp, None)


@contextlib.contextmanager
def undo_created(path: str | os.PathLike) -> Iterator[None]:
    """For a command that creates its ``--out`` (``check_out``) and may fail before it writes there:
    the folder ``path`` and the parents that did not exist when the block began are removed again
    when the block fails and leaves them empty (a folder that existed before, or holds anything,
    stays). ``output_dir`` does this; ``interp tour`` and ``interp train``, which lock and stage
    their folder themselves, call it."""
    created = _missing_top(Path(os.path.abspath(path)))
    try:
        yield
    except BaseException:
        if created is not None:
            _remove_empty(Path(os.path.abspath(path)), created)
        raise


def _missing_top(path: Path) -> Path | None:
    """The outermost folder of ``path`` (itself or a parent) that does not exist yet; None: it exists."""
    top = None
    while not _lexists(path) and path != path.parent:
        top, path = path, path.parent
    return top


def _remove_empty(path: Path, top: Path) -> None:
    """Remove ``path`` and its parents up to ``top``, while each is an empty folder (``os.rmdir``
    refuses anything else: a folder holding a file, or one another process filled, stays)."""
    while True:
        try:
            os.rmdir(path)
        except OSError:
            return
        if path == top or path == path.parent:
            return
        path = path.parent


def write_set(
    folder: str | os.PathLike,
    owned: Sequence[str],
    write_files: Callable[[Path], Any],
    command: str = "interp",
    force: bool = False,
) -> Path:
    """The analyses' one way to write a result: ``write_files(tmp)`` writes the files named by
    ``owned`` into a staging folder, committed into ``folder`` as one output set (``output_dir``).
    Called with the staging folder of a set already open (a command that opened ``output_dir`` before
    its work, so that a bad folder fails in the first second), it writes there and the open set
    commits. Returns ``folder``."""
    with output_dir(folder, owned, command=command, force=force) as tmp:
        write_files(tmp)
    return Path(folder)


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
