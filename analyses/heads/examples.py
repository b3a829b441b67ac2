"""Example patterns: every head's attention on a few sentences, the one producer behind the report
page's head detail, the probe's ``pattern_<role>.png`` figures and ``HeadExplorer`` in a notebook.

One forward pass per sentence captures every layer's pattern (and, where the model exposes
``attn.hook_v`` and ``W_O``, the norm lens: Kobayashi et al. 2020, a_ij ||v_j W_O|| renormalised
per row, the probe's ``weighting = norm``). ``example_patterns`` returns them as an
``ExamplePatterns``: ``.page()`` is the JSON the page embeds (``examples.json``: weights as base64
uint8), and the object is also the sequence of figure examples, one per role, the best head of that
role in the heads table on the sentence that shows the role.

>>> import models
>>> from analyses import heads
>>> ex = heads.example_patterns(models.load("minilm"), df, sentences=["the cat sleeps .", "my own text"])
>>> ex.page()["sentences"][0]["tokens"]   # doctest: +SKIP
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from analyses.heads.adapter import adapt
from analyses.heads.scoring import norm_weighted, value_norms
from analyses.heads.summaries import top_head
from interp.display import token_label
from interp.names import act_name
from models.tokenizer import UnreadableTextError

__all__ = [
    "Sentence",
    "EXAMPLE_SENTENCES",
    "EXAMPLES",
    "ExamplePatterns",
    "example_patterns",
    "dequantise",
    "readable_sentences",
    "as_sentences",
]


@dataclass(frozen=True)
class Sentence:
    """A sentence to show, as words (so that every tokenizer aligns them), and the roles it
    illustrates: role -> (query word index, gold word index), for the probe's figures."""

    name: str
    words: tuple[str, ...]
    roles: Mapping[str, tuple[int, int]] = field(default_factory=dict)


# Short sentences that exercise the roles: a subject-verb agreement across an attractor, a pronoun
# whose antecedent is not the nearest noun, boundaries and punctuation, and a repeated sequence
# (duplicate-token and induction heads).
EXAMPLE_SENTENCES: tuple[Sentence, ...] = (
    Sentence(
        "subject-verb",
        ("the", "keys", "to", "the", "old", "cabinet", "are", "on", "the", "table", "."),
        {"subject_verb": (6, 1)},
    ),
    Sentence(
        "anaphora",
        ("the", "doctor", "called", "the", "nurse", "because", "he", "was", "late", "."),
        {"anaphora": (6, 1)},
    ),
    Sentence(
        "delimiters",
        ("the", "cat", "sleeps", ",", "and", "the", "dog", "barks", "."),
        {"delimiter": (6, 3), "previous_token": (2, 1)},
    ),
    Sentence(
        "repeated", ("green", "river", "stones", "fall", "slowly", ";", "green", "river", "stones", "fall", "slowly")
    ),
)
# the roles with a figure, in the order the probe's report shows them
EXAMPLES: tuple[str, ...] = ("subject_verb", "anaphora", "delimiter", "previous_token")


def as_sentences(sentences: object) -> tuple[Sentence, ...]:
    """``Sentence``s from what a user may pass: ``Sentence``s, plain strings (words split on
    whitespace, named by their position) or (name, words) pairs."""
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TypeError(f"sentences: expected a list of strings or Sentence objects, got {type(sentences).__name__}")
    out = []
    for i, s in enumerate(sentences):
        if isinstance(s, Sentence):
            out.append(s)
        elif isinstance(s, str):
            out.append(Sentence(f"sentence {i + 1}", tuple(s.split())))
        elif isinstance(s, Sequence) and len(s) == 2 and isinstance(s[0], str) and not isinstance(s[1], str):
            out.append(Sentence(s[0], tuple(str(w) for w in s[1])))
        else:
            raise TypeError(f"sentences[{i}]: expected a string, a Sentence or a (name, words) pair, got {s!r}")
    empty = [s.name for s in out if not s.words]
    if not out or empty:
        raise ValueError(f"example_patterns needs sentences with words (empty: {empty}), e.g. EXAMPLE_SENTENCES")
    return tuple(out)


def _quantise(p: np.ndarray) -> str:
    """Weights in [0, 1] as base64 uint8 (255 = 1): a quarter of float32's size, and 1/255 is finer
    than a colour scale shows."""
    q = np.clip(np.rint(np.asarray(p, dtype=np.float64) * 255.0), 0, 255).astype(np.uint8)
    return base64.b64encode(q.tobytes()).decode("ascii")


def dequantise(b64: str, n: int) -> np.ndarray:
    """The [n, n] weights of ``_quantise`` (to within 1/510)."""
    return np.frombuffer(base64.b64decode(b64), dtype=np.uint8).reshape(n, n).astype(np.float64) / 255.0


@dataclass
class ExamplePatterns(Sequence):
    """Every head's patterns on the sentences, and the figure examples (a sequence of dicts: role,
    title, sentence, tokens, pattern [q, k], row, col, layer, head, labelled, causal, query_word,
    gold_word; ``analyses.heads.report.pattern_figure`` draws one)."""

    sentences: list[dict]  # {name, text, tokens} per sentence shown (longer than n_ctx: left out)
    patterns: dict[str, dict[str, list[str]]]  # "layer,head" -> {"attention": [b64], "norm": [b64]}
    figures: list[dict] = field(default_factory=list)

    def page(self) -> dict:
        """What the report page embeds (and ``examples.json`` holds): sentences and patterns."""
        return {"sentences": self.sentences, "patterns": self.patterns}

    def __getitem__(self, i):  # noqa: ANN001, ANN204
        return self.figures[i]

    def __len__(self) -> int:
        return len(self.figures)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.figures)


def _norm_weights(adapter) -> dict | None:
    """Each layer's W_O where the model has it and every ``attn.hook_v``; else None (weights only)."""
    L = adapter.n_layers
    w_o = {l: adapter.output_weights(l) for l in range(L)}
    hook_names = set(getattr(adapter.model, "hook_dict", {}) or {})
    if any(w is None for w in w_o.values()) or any(act_name(l, "attn.hook_v") not in hook_names for l in range(L)):
        return None
    return w_o


def readable_sentences(tokenizer, sentences: Sequence[Sentence] = EXAMPLE_SENTENCES) -> list[Sentence]:
    """The sentences of which ``tokenizer`` can read some word (a tiny model's vocabulary may lose
    every word of one to its unknown token): the reference set of a mean ablation."""
    out = []
    for s in sentences:
        try:
            tokenizer.words([list(s.words)])
        except UnreadableTextError:
            continue
        out.append(s)
    return out


def _capture(adapter, words: Sequence[str], w_o: dict | None) -> tuple | None:
    """One forward pass: (batch, n tokens, {layer: [head, q, k] pattern}, {layer: normed} or None),
    or None when the sentence is longer than the model's context or unreadable to its tokenizer."""
    try:
        batch = adapter.tokenizer.words([list(words)])
    except UnreadableTextError:
        return None  # every word unknown to this vocabulary (a tiny model's): nothing to show
    if adapter.n_ctx and batch.input_ids.shape[1] > adapter.n_ctx:
        return None
    got: dict[str, torch.Tensor] = {}

    def keep(t, hook):
        got[hook.name] = t.detach().float().cpu()

    L = adapter.n_layers
    hooks = [(adapter.hook_name(l), keep) for l in range(L)]
    if w_o is not None:
        hooks += [(act_name(l, "attn.hook_v"), keep) for l in range(L)]
    with torch.inference_mode():
        adapter.forward(batch, hooks)
    n = int(batch.attention_mask[0].sum())
    att = {l: got[adapter.hook_name(l)][0, :, :n, :n].numpy() for l in range(L)}
    normed = None
    if w_o is not None:
        normed = {}
        for l in range(L):
            v = got[act_name(l, "attn.hook_v")][:, :n]
            normed[l] = norm_weighted(got[adapter.hook_name(l)][:, :, :n, :n], value_norms(v, w_o[l]))[0].numpy()
    return batch, n, att, normed


def _figure(role: str, s: Sentence, batch, att: dict, df: pd.DataFrame, causal: bool) -> dict:
    """The figure example of ``role``: its best head in ``df`` on sentence ``s``."""
    q_word, g_word = s.roles[role]
    layer, head, labelled, _ = top_head(df, role)
    align = batch.token_to_word[0]
    q_toks = [i for i, w in enumerate(align) if w == q_word]
    g_toks = [i for i, w in enumerate(align) if w == g_word]
    n = att[layer].shape[-1]
    return {
        "role": role,
        "title": f"{role}: L{layer}H{head}" + ("" if labelled else " (best, unlabelled)"),
        "sentence": " ".join(s.words),
        "tokens": list(batch.tokens[0][:n]),
        "pattern": att[layer][head],
        "row": q_toks[-1] if q_toks else None,
        "col": g_toks[0] if g_toks else None,
        "layer": layer,
        "head": head,
        "labelled": labelled,
        "causal": causal,
        "query_word": s.words[q_word],
        "gold_word": s.words[g_word],
    }


def example_patterns(
    model,
    heads_df: pd.DataFrame | None = None,
    sentences: Sequence | None = None,
    *,
    heads: Sequence[tuple[int, int]] | None = None,
    roles: Sequence[str] = EXAMPLES,
    tokenizer=None,
) -> ExamplePatterns:
    """Every head's attention (and norm lens) on ``sentences`` (default ``EXAMPLE_SENTENCES``;
    plain strings are fine), one forward pass each. With ``heads_df`` (the probe's table), also a
    figure example per role in ``roles`` that some sentence illustrates and the table scored: the
    role's best head (``summaries.top_head``) on that sentence. ``heads``: the (layer, head) pairs to
    keep patterns for (default all)."""
    sents = EXAMPLE_SENTENCES if sentences is None else as_sentences(sentences)
    adapter = adapt(model, tokenizer)
    L, H = adapter.n_layers, adapter.n_heads
    wanted = [(l, h) for l in range(L) for h in range(H)] if heads is None else [(int(l), int(h)) for l, h in heads]
    bad = [(l, h) for l, h in wanted if not (0 <= l < L and 0 <= h < H)]
    if bad:
        raise ValueError(f"heads {bad[:3]} are outside the model's {L} layers x {H} heads")
    w_o = _norm_weights(adapter)
    out = ExamplePatterns([], {f"{l},{h}": {"attention": []} | ({"norm": []} if w_o else {}) for l, h in wanted})
    scored = set() if heads_df is None else set(heads_df.loc[heads_df["score"].notna(), "role"])
    figures = {}
    for s in sents:
        got = _capture(adapter, s.words, w_o)
        if got is None:
            continue  # longer than the model's context: not an example for it
        batch, n, att, normed = got
        tokens = [token_label(t) for t in batch.tokens[0][:n]]
        out.sentences.append({"name": s.name, "text": " ".join(s.words), "tokens": tokens})
        for l, h in wanted:
            out.patterns[f"{l},{h}"]["attention"].append(_quantise(att[l][h]))
            if normed is not None:
                out.patterns[f"{l},{h}"]["norm"].append(_quantise(normed[l][h]))
        for role in s.roles:
            if role in roles and role in scored and role not in figures:
                figures[role] = _figure(role, s, batch, att, heads_df, adapter.is_causal)
    out.figures = [figures[r] for r in roles if r in figures]
    return out
