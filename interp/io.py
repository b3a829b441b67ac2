"""The toolkit's one way to write files, and its one way to format numbers and markdown tables.

- ``atomic_write(path, data)``: text or bytes through a temporary file in the same folder and
  ``os.replace``: a reader sees the old file or the new one, never half of one.
- ``atomic_save(path, save)``: the same for writers that want a path (``fig.savefig``,
  ``safetensors.save_file``, ``DataFrame.to_csv``).
- ``atomic_dir(path)``: a whole folder built in a temporary sibling and swapped in at the end.
- ``fmt(x)`` and ``md_table(df)``: numbers and tables for the markdown reports.

Imports nothing heavy (no torch, no pandas at import time).
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["atomic_write", "atomic_save", "atomic_dir", "fmt", "md_table", "png_bytes"]

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


def md_table(df: Any, columns: Sequence[str] | None = None, empty: str = "_(none)_", digits: int = 3) -> str:
    """A pandas DataFrame as a GitHub markdown table: numbers through ``fmt``, ``|`` escaped.
    ``columns`` picks and orders the columns (default: all). ``empty`` is returned for no rows."""
    cols = list(df.columns) if columns is None else list(columns)
    if len(df) == 0:
        return empty + "\n"
    lines = ["| " + " | ".join(str(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for row in df[cols].itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v, digits).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines) + "\n"


def png_bytes(fig: Any, dpi: int = 90, **savefig_kwargs: Any) -> bytes:
    """A matplotlib figure as PNG bytes; the figure is closed."""
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, **savefig_kwargs)
    plt.close(fig)
    return buf.getvalue()
