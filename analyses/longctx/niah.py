"""A needle-in-a-haystack task on real text, built from token ids so that the needle's place in
the prompt is known exactly.

A trial is a chat prompt (the model's own chat template): the user turn holds a haystack of
``length`` tokens of real English (``analyses.longctx.text.long_windows``) with a needle sentence,
"The secret code is 4829317.", spliced in at a sentence or passage boundary near ``depth`` (0: the
start, 1: the end), then a question; the assistant turn is opened with "The secret code is " so
that the model's next tokens are the code itself. The code is ``CODE_LENGTH`` distinct random
digits: SmolLM2's tokenizer writes each digit as its own token, so every code token occurs once in
the needle and a copied token points at exactly one needle position (what the retrieval score
needs).

Pieces are tokenised separately and joined as ids, never re-tokenised as one string: the needle's
ids are the same in every haystack, and ``Trial.code_start`` is where its code begins in
``Trial.tokens``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from analyses.longctx.text import long_windows

__all__ = [
    "ANSWER_PREFIX",
    "CODE_LENGTH",
    "DEPTHS",
    "NEEDLE",
    "QUESTION",
    "Trial",
    "boundaries",
    "build_trial",
    "insert_needle",
    "random_code",
    "trials",
]

NEEDLE = " The secret code is {code}."  # the needle sentence; its code is the part to reproduce
QUESTION = "\n\nWhat is the secret code given in the text above? Answer with the code only."
ANSWER_PREFIX = "The secret code is "  # opens the assistant turn: the next tokens are the code
CODE_LENGTH = 7
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
_HOLE = "\x00HAYSTACK\x00"  # stands for the user turn while the chat template is applied


@dataclass(frozen=True)
class Trial:
    """One prompt: ``tokens`` (the whole chat prompt, ids), the code's ids ``code`` at
    ``tokens[code_start : code_start + len(code)]``, the haystack ``length`` (tokens, needle not
    counted), the ``depth`` asked for, where the needle went in the haystack (``insert_at``, a
    token index of the haystack), and the haystack's index ``window``."""

    tokens: tuple[int, ...]
    code: tuple[int, ...]
    code_start: int
    length: int
    depth: float
    insert_at: int
    window: int

    @property
    def code_positions(self) -> range:
        return range(self.code_start, self.code_start + len(self.code))


def random_code(rng: random.Random, n: int = CODE_LENGTH) -> str:
    """``n`` distinct digits in random order (each digit one token, each token once in the needle)."""
    if not 1 <= n <= 10:
        raise ValueError(f"a code of {n} distinct digits does not exist; use 1..10")
    return "".join(rng.sample("0123456789", n))


def _encode(tokenizer, text: str) -> list[int]:
    hf = getattr(tokenizer, "hf", tokenizer)
    return list(hf.encode(text, add_special_tokens=False))


def _piece(tokenizer, token_id: int, cache: dict[int, str]) -> str:
    if token_id not in cache:
        hf = getattr(tokenizer, "hf", tokenizer)
        cache[token_id] = hf.decode([token_id])
    return cache[token_id]


def boundaries(tokenizer, haystack: list[int]) -> list[int]:
    """The indices where a sentence or passage may start in ``haystack``: 0, ``len(haystack)``, and
    every index after a token that ends a sentence ('.', '!', '?', possibly with a closing quote or
    bracket) or holds a line break."""
    cache: dict[int, str] = {}
    out = [0]
    for i in range(1, len(haystack)):
        piece = _piece(tokenizer, haystack[i - 1], cache)
        end = piece.rstrip(" \"')]")
        if "\n" in piece or end.endswith((".", "!", "?")):
            out.append(i)
    if out[-1] != len(haystack):
        out.append(len(haystack))
    return out


def insert_needle(haystack: list[int], needle: list[int], depth: float, allowed: list[int]) -> tuple[list[int], int]:
    """``haystack`` with ``needle`` inserted at the boundary of ``allowed`` nearest to ``depth *
    len(haystack)`` (ties: the earlier one); returns (the new ids, the insertion index)."""
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth={depth}: a needle depth is a fraction of the haystack, in [0, 1]")
    if not allowed:
        raise ValueError("no boundary to insert the needle at: pass at least one index")
    target = depth * len(haystack)
    at = min(allowed, key=lambda i: (abs(i - target), i))
    if not 0 <= at <= len(haystack):
        raise ValueError(f"boundary {at} lies outside the haystack of {len(haystack)} tokens")
    return haystack[:at] + list(needle) + haystack[at:], at


def _chat_halves(tokenizer) -> tuple[list[int], list[int]]:
    """The ids before and after the user's text in the chat template (with the generation prompt),
    the answer prefix appended; a tokenizer without a chat template gets a plain prompt."""
    hf = getattr(tokenizer, "hf", tokenizer)
    if getattr(hf, "chat_template", None):
        text = hf.apply_chat_template([{"role": "user", "content": _HOLE}], tokenize=False, add_generation_prompt=True)
        before, after = text.split(_HOLE)
    else:
        before, after = "", "\n\n"
    return _encode(hf, before), _encode(hf, QUESTION + after) + _encode(hf, ANSWER_PREFIX)


def build_trial(tokenizer, haystack: list[int], depth: float, code: str, window: int = 0) -> Trial:
    """One trial from a haystack's ids: the needle carrying ``code`` at ``depth``."""
    if not code.isdigit():
        raise ValueError(f"code={code!r}: a code is a string of digits")
    needle = _encode(tokenizer, NEEDLE.format(code=code))
    code_ids = _encode(tokenizer, code)
    if len(code_ids) != len(code):
        raise ValueError(f"the tokenizer writes the code {code!r} as {len(code_ids)} tokens, not one per digit")
    # where the code's ids sit in the needle (the ids of " is 123" end with those of "123")
    offset = len(needle) - 1 - len(code_ids)
    if needle[offset : offset + len(code_ids)] != code_ids:
        raise ValueError("the needle's tokens do not contain the code's tokens as written alone")
    hay, at = insert_needle(list(haystack), needle, depth, boundaries(tokenizer, list(haystack)))
    before, after = _chat_halves(tokenizer)
    tokens = before + hay + after
    return Trial(
        tokens=tuple(tokens),
        code=tuple(code_ids),
        code_start=len(before) + at + offset,
        length=len(haystack),
        depth=float(depth),
        insert_at=at,
        window=window,
    )


def trials(
    tokenizer, length: int, n: int, depths=DEPTHS, seed: int = 0, skip: int = 0, per_depth: bool = True
) -> list[Trial]:
    """Trials over ``n`` haystacks of ``length`` tokens (windows ``skip .. skip + n - 1`` of one
    ``long_windows`` draw, so two calls with disjoint ``skip`` ranges share no passage). With
    ``per_depth`` every haystack is used at every depth (``n * len(depths)`` trials); without it
    haystack i gets depth ``depths[i % len(depths)]`` (``n`` trials). Codes are random per trial,
    from ``seed``."""
    if n < 1:
        raise ValueError(f"n={n}: ask for at least one haystack")
    windows = long_windows(tokenizer, length, skip + n, seed=seed)[skip:]
    rng = random.Random(f"niah-{seed}-{length}-{skip}")
    out = []
    for i, hay in enumerate(windows):
        ds = depths if per_depth else (depths[i % len(depths)],)
        for d in ds:
            out.append(build_trial(tokenizer, hay, d, random_code(rng), window=skip + i))
    return out
