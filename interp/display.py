"""How the toolkit shows things to a person: one rule for a token (``token_label`` for pages and
tables, ``figure_label`` for matplotlib tick labels and titles), one for a number (``fmt``), a
markdown table (``md_table``) and a figure's PNG bytes (``png_bytes``). Imports nothing heavy.

Tokenizers mark spaces and line breaks with characters of their own: GPT-2-style byte-level BPE
(SmolLM2, GPT-2, Llama 3) writes a leading space as ``Ġ`` and a newline as ``Ċ``; SentencePiece
(Llama 2, T5, Mistral) writes a leading space as ``▁``. Both become ``_`` (a word starts here) and
a newline becomes the two characters ``\\n``, so one label reads the same whichever model made it.
WordPiece's ``##`` (BERT, MiniLM: the piece continues the previous word) is kept: it is the only
mark such a tokenizer gives, and without it ``##ing`` and ``ing`` would look alike.

``figure_label`` also escapes ``$``: matplotlib reads text between two ``$`` as mathtext, so a
token ``$$`` (SmolLM2 has one) would make the figure fail to draw.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas and matplotlib are imported by the callers that pass them
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["token_label", "figure_label", "SPACE_MARKS", "fmt", "md_table", "png_bytes"]

# marker -> what a reader sees; applied in this order, character by character
SPACE_MARKS: dict[str, str] = {
    "\u0120": "_",  # Ġ: byte-level BPE's space
    "\u2581": "_",  # ▁: SentencePiece's space
    "\u010a": "\\n",  # Ċ: byte-level BPE's newline
    "\u0109": "\\t",  # ĉ: byte-level BPE's tab
    "\n": "\\n",  # a decoded newline or tab would break a one-line label
    "\t": "\\t",
}
_TABLE = str.maketrans(SPACE_MARKS)


def token_label(token: object) -> str:
    """A token as a page or a table shows it: space marks as ``_``, line breaks as ``\\n``.

    >>> token_label("Ġcat"), token_label("▁cat"), token_label("##ing"), token_label("Ċ")
    ('_cat', '_cat', '##ing', '\\\\n')
    """
    return str(token).translate(_TABLE)


def figure_label(token: object) -> str:
    """``token_label`` made safe for matplotlib text: every ``$`` escaped (no mathtext).

    >>> figure_label("$$")
    '\\\\$\\\\$'
    """
    return token_label(token).replace("$", "\\$")


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
