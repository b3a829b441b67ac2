"""One rule for showing a token to a person: ``token_label`` (pages, tables) and ``figure_label``
(matplotlib tick labels and titles).

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

__all__ = ["token_label", "figure_label", "SPACE_MARKS"]

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
