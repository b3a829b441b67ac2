"""Causal validation of head labels: does a head labelled by its attention pattern do that job?

For every labelled head, ablate it (``interp.interventions``, default mean-ablation of ``hook_z``)
and measure how much a behaviour tied to its role degrades, against the degradation caused by
ablating random heads.

Behaviours (every metric is a per-prompt score where higher is better; an ablation's **effect** is
``clean score - ablated score`` averaged over the prompts that count, so a positive effect means the
head helps the behaviour):

=========================  =======  ==========================================================
metric                     model    score per prompt
=========================  =======  ==========================================================
``sv_logit_diff``          causal   logit(right verb) - logit(wrong verb) after a subject with an
                                    attractor ("The keys to the cabinet" -> " are" vs " is")
``anaphora_logit_diff``    causal   logit(agreeing pronoun) - logit(other one) ("The king who met
                                    the women was late because" -> " he" vs " she")
``delimiter_loss``         causal   minus the next-token loss at tokens that follow punctuation
``induction_loss``         causal   minus the loss on the second copy of a repeated random sequence
``loss``                   causal   minus the mean next-token loss of the natural prompts
``sv_probe``               encoder  log-odds of the subject's number read by a linear probe from
                                    the masked verb's final state ("the keys near the door [MASK]")
``anaphora_probe``         encoder  log-odds of the antecedent's gender read from the masked pronoun
``prev_word_probe``        encoder  log-odds of the preceding determiner ("the"/"a") read from the noun
``delimiter_probe``        encoder  log-odds of the final punctuation ("." / "!") read from the verb
=========================  =======  ==========================================================

Encoder probes are logistic regressions trained on the clean run's final states of one half of the
prompts and scored on the other half; the tokens the probes read are masked ([MASK]) or are not the
label's word, so the information must travel there through attention.

Roles -> metrics (``role_metric``): subject_verb -> sv; anaphora -> anaphora; delimiter,
punctuation, sep, end-of-sentence -> delimiter; induction, duplicate -> induction_loss (causal);
local, previous / next / self token -> loss (causal) or prev_word_probe (encoder); any other role ->
loss (causal) and no metric (encoder: such rows get verdict ``inconclusive``, reason "no metric").

Decision rule (per labelled head and role, one metric):

* **null**: effects of ablating heads drawn uniformly at random from all layers (the head itself
  excluded): ``null_mean``, ``null_std``, ``z = (effect - null_mean) / null_std`` and the empirical
  one-sided p-value ``p = (1 + #{null >= effect}) / (1 + n_null)``. The same numbers against random
  heads of the head's own layer are reported (``*_layer``) but do not enter the verdict (a layer has
  too few heads for a p-value below 0.05). Benjamini-Hochberg within each role, over the role's
  8 best labels by probe score (a family fixed before any ablation), gives ``q_value``, reported
  beside ``p_value``; the role's other labels have a p-value and a verdict and no q.
* **why the verdict uses p, and q is reported**: each label is its own a-priori hypothesis about one
  head, and the smallest attainable empirical p is ``1 / (n_null + 1)``. The CLI's null is every
  head of the model (72 for MiniLM, 270 for SmolLM2; the API default too), so p can reach 0.0037
  on SmolLM2, and with 8 heads in a family a head that beats every random head reaches
  q = 8 x 0.0037 = 0.03; the summary lists the labels validated at q <= 0.05.
* **measurable**: the 95% bootstrap interval of the effect over prompts excludes 0 *and* ``|effect|``
  is at least ``min_effect`` = ``rel`` x scale, scale = mean |clean score| (logit differences,
  probe log-odds; rel 0.05) or the mean clean loss (loss metrics; rel 0.005).
* ``validated``: measurable, positive, and ``p_value <= alpha`` (the head beats at least a fraction
  ``1 - alpha`` of random heads; with 20 null heads: all of them).
* ``pattern only``: no measurable effect in either direction.
* ``inconclusive``: everything else: a measurable effect that random heads match, an ablation that
  *helps*, no behaviour metric for the role, or an encoder probe that fails on clean held-out
  prompts (mean log-odds <= 0: it cannot show a loss of information).

The other direction: every evaluated head without a label tied to a metric whose effect is measurable,
positive, and has ``p <= alpha`` against the same null is listed in ``unlabelled``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from analyses.data.generated import random_repeated_tokens
from analyses.data.items import is_punctuation
from analyses.validation.labels import check_labels, read_labels
from interp import interventions as iv
from interp.distributed import World, current
from interp.names import act_name
from interp.stats import bh, bootstrap_ci
from interp.view import view

__all__ = [
    "VERDICTS",
    "COLUMNS",
    "Task",
    "PromptSet",
    "build_prompts",
    "role_metric",
    "fit_probe",
    "metric_functions",
    "empirical_p",
    "decide",
    "validate",
    "ValidationResult",
    "planted_model",
    "planted_prompts",
    "pattern_labels",
    "read_labels",
    "check_labels",
]

VERDICTS = ("validated", "pattern only", "inconclusive")
COLUMNS = [
    "model",
    "layer",
    "head",
    "role",
    "metric",
    "ablation",
    "effect",
    "ci_low",
    "ci_high",
    "clean",
    "min_effect",
    "null_mean",
    "null_std",
    "n_null",
    "z",
    "p_value",
    "q_value",
    "null_mean_layer",
    "p_value_layer",
    "n_null_layer",
    "n_items",
    "label_score",
    "verdict",
    "reason",
]
REL_MIN_EFFECT = {"logit_diff": 0.05, "probe": 0.05, "loss": 0.005}


# --------------------------------------------------------------------------------------------------
# Prompts


@dataclass
class Task:
    """What one metric reads from a batch.

    kind: "logit_diff" (rows, pos, right, wrong token ids), "loss" (loss_mask [batch, pos]: the
    next-token predictions made at these positions count), "probe" (rows, pos, label 0/1, split:
    True for rows the probe is trained on)."""

    metric: str
    kind: str
    description: str
    rows: np.ndarray
    pos: np.ndarray | None = None
    right: np.ndarray | None = None
    wrong: np.ndarray | None = None
    label: np.ndarray | None = None
    train: np.ndarray | None = None
    loss_mask: Tensor | None = None


@dataclass
class PromptSet:
    tokens: Tensor  # [batch, pos]
    attention_mask: Tensor  # [batch, pos]
    texts: list
    family: list
    tasks: dict
    token_type_ids: Tensor | None = None

    def forward_kwargs(self) -> dict:
        kw = {"attention_mask": self.attention_mask}
        if self.token_type_ids is not None:
            kw["token_type_ids"] = self.token_type_ids
        return kw


_SV_SUBJ = [
    ("key", "keys"),
    ("dog", "dogs"),
    ("book", "books"),
    ("teacher", "teachers"),
    ("car", "cars"),
    ("girl", "girls"),
    ("picture", "pictures"),
    ("student", "students"),
    ("bird", "birds"),
    ("song", "songs"),
]
_SV_ATTR = [
    ("cabinet", "cabinets"),
    ("table", "tables"),
    ("tree", "trees"),
    ("house", "houses"),
    ("window", "windows"),
    ("door", "doors"),
    ("garden", "gardens"),
    ("box", "boxes"),
]
_SV_PREP = ["to", "near", "behind", "next to", "on", "under", "by", "beside"]
_GENDER = [
    ("king", "queen"),
    ("man", "woman"),
    ("father", "mother"),
    ("boy", "girl"),
    ("brother", "sister"),
    ("husband", "wife"),
    ("son", "daughter"),
    ("uncle", "aunt"),
    ("prince", "princess"),
    ("actor", "actress"),
]
_GENDER_PL = {0: ["men", "boys", "kings", "brothers"], 1: ["women", "girls", "queens", "sisters"]}
_VP = ["was late", "was tired", "left early", "smiled", "was happy", "laughed"]
_NOUNS = ["dog", "cat", "bird", "boy", "girl", "car", "tree", "child", "man", "horse"]
_VERBS = ["slept", "ran", "sang", "waited", "stopped", "fell", "jumped", "left"]


def _is_lm(model) -> bool:
    """A causal model with next-token logits (the metrics that read logits need one)."""
    v = view(model)
    return v.causal and v.lm_head


def _repeated(model, n: int, half: int, rng: np.random.Generator) -> Tensor:
    """[n, 2 * half] random token sequences repeated once, from mid-frequency ids (1000..5000 of a
    real vocabulary: no bytes, no special tokens), drawn from ``rng``."""
    d_vocab = view(model).d_vocab
    lo, hi = min(1000, d_vocab // 4), min(5000, d_vocab)
    return random_repeated_tokens(n, half, d_vocab, seed=rng, distinct=False, low=lo, high=hi)


def _single_token(tok, text: str) -> int:
    ids = tok.hf.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(
            f"{text!r} is {len(ids)} tokens in this tokenizer; the logit-difference metric needs single tokens"
        )
    return ids[0]


def _causal_prompts(model, n: int, rng: np.random.Generator) -> PromptSet:
    tok = model.tokenizer
    texts, family, meta = [], [], []
    is_, are = _single_token(tok, " is"), _single_token(tok, " are")
    he, she = _single_token(tok, " he"), _single_token(tok, " she")
    for i in range(n):  # subject-verb with an attractor of the other number (most of the time)
        s = _SV_SUBJ[rng.integers(len(_SV_SUBJ))]
        a = _SV_ATTR[rng.integers(len(_SV_ATTR))]
        plural = int(i % 2)
        attr_plural = 1 - plural if rng.random() < 0.75 else plural
        texts.append(f"The {s[plural]} {_SV_PREP[rng.integers(len(_SV_PREP))]} the {a[attr_plural]}")
        family.append("subject_verb")
        meta.append((are, is_) if plural else (is_, are))
    for i in range(n):  # anaphora; half with a plural distractor of the other gender
        g = int(i % 2)
        noun = _GENDER[rng.integers(len(_GENDER))][g]
        vp = _VP[rng.integers(len(_VP))]
        if rng.random() < 0.5:
            other = _GENDER_PL[1 - g][rng.integers(4)]
            texts.append(f"The {noun} who met the {other} {vp} because")
        else:
            texts.append(f"The {noun} {vp} because")
        family.append("anaphora")
        meta.append((she, he) if g else (he, she))
    n_text = max(2, n // 2)
    for _ in range(n_text):  # punctuation-rich text for the delimiter metric
        a, b, c = rng.choice(_NOUNS, 3, replace=False)
        u, v, w = rng.choice(_VERBS, 3, replace=False)
        texts.append(f"The {a} {u}, and the {b} {v}. Then the {c} {w}.")
        family.append("text")
        meta.append(None)
    batch = tok(texts)
    ids, mask = batch.input_ids, batch.attention_mask.bool()
    # repeated random token sequences (induction); drawn from mid-frequency ids, same length
    n_rep, half = max(2, n // 2), 6
    rep = _repeated(model, n_rep, half, rng)
    width = max(ids.shape[1], rep.shape[1])
    pad = tok.pad_token_id

    def padded(x, m):
        return (F.pad(x, (0, width - x.shape[1]), value=pad), F.pad(m, (0, width - m.shape[1]), value=False))

    ids, mask = padded(ids, mask)
    rep_ids, rep_mask = padded(rep, torch.ones_like(rep, dtype=torch.bool))
    tokens = torch.cat([ids, rep_ids])
    attention_mask = torch.cat([mask, rep_mask])
    texts = texts + [tok.decode(r) for r in rep.tolist()]
    family = family + ["repeat"] * n_rep
    fam = np.array(family)
    last = attention_mask.sum(1).numpy() - 1

    tasks = {}
    for name, fam_name, what in [
        ("sv_logit_diff", "subject_verb", "logit(right verb) - logit(wrong verb) at the subject's end"),
        ("anaphora_logit_diff", "anaphora", "logit(agreeing pronoun) - logit(other gender's) after 'because'"),
    ]:
        rows = np.flatnonzero(fam == fam_name)
        tasks[name] = Task(
            name,
            "logit_diff",
            what,
            rows,
            pos=last[rows],
            right=np.array([meta[r][0] for r in rows]),
            wrong=np.array([meta[r][1] for r in rows]),
        )
    natural = torch.as_tensor(np.isin(fam, ["subject_verb", "anaphora", "text"]))
    nxt = torch.zeros_like(attention_mask)
    nxt[:, :-1] = attention_mask[:, 1:]
    real_pred = attention_mask & nxt  # positions whose next token is real
    tasks["loss"] = Task(
        "loss",
        "loss",
        "minus mean next-token loss over the natural prompts",
        np.flatnonzero(natural.numpy()),
        loss_mask=real_pred & natural[:, None],
    )
    punct = torch.zeros_like(attention_mask)
    text_rows = np.flatnonzero(fam == "text")
    for r in text_rows:
        for p in range(int(attention_mask[r].sum())):
            s = tok.decode([int(tokens[r, p])]).strip()
            punct[r, p] = is_punctuation(s)
    tasks["delimiter_loss"] = Task(
        "delimiter_loss",
        "loss",
        "minus next-token loss at tokens following punctuation",
        text_rows,
        loss_mask=real_pred & punct,
    )
    ind = torch.zeros_like(attention_mask)
    rep_rows = np.flatnonzero(fam == "repeat")
    ind[torch.as_tensor(rep_rows)[:, None], torch.arange(half, 2 * half - 1)[None]] = True
    tasks["induction_loss"] = Task(
        "induction_loss",
        "loss",
        "minus loss on the second copy of a repeated random sequence",
        rep_rows,
        loss_mask=ind & real_pred,
    )
    return PromptSet(tokens, attention_mask.long(), texts, family, tasks)


def _encoder_prompts(model, n: int, rng: np.random.Generator) -> PromptSet:
    tok = model.tokenizer
    mask_id = getattr(tok.hf, "mask_token_id", None)
    if mask_id is None:
        raise ValueError("encoder probes need a tokenizer with a [MASK] token")
    words, family, labels, read_word = [], [], [], []
    for i in range(n):
        s = _SV_SUBJ[rng.integers(len(_SV_SUBJ))]
        a = _SV_ATTR[rng.integers(len(_SV_ATTR))]
        plural = int(i % 2)
        attr_plural = 1 - plural if rng.random() < 0.75 else plural
        prep = _SV_PREP[rng.integers(len(_SV_PREP))].split()
        words.append(["the", s[plural], *prep, "the", a[attr_plural], "[MASK]", "on", "the", "floor", "."])
        family.append("subject_verb"), labels.append({"sv_probe": plural}), read_word.append({})
    for i in range(n):
        g = int(i % 2)
        noun = _GENDER[rng.integers(len(_GENDER))][g]
        mid = ["who", "met", "the", _GENDER_PL[1 - g][rng.integers(4)]] if rng.random() < 0.5 else []
        words.append(["the", noun, *mid, "said", "that", "[MASK]", "was", "tired", "."])
        family.append("anaphora"), labels.append({"anaphora_probe": 1 - g}), read_word.append({})
    for i in range(n):
        det = "the" if i % 2 == 0 else "a"
        end = "." if (i // 2) % 2 == 0 else "!"
        noun, verb = _NOUNS[rng.integers(len(_NOUNS))], _VERBS[rng.integers(len(_VERBS))]
        words.append([det, noun, verb, "near", "the", "old", "house", end])
        family.append("plain")
        labels.append({"prev_word_probe": int(det == "the"), "delimiter_probe": int(end == ".")})
        read_word.append({"prev_word_probe": 1, "delimiter_probe": 2})
    batch = tok.words(words)
    tokens, attention_mask = batch.input_ids, batch.attention_mask
    tasks = {}
    descr = {
        "sv_probe": "probe log-odds of the subject's number at the masked verb",
        "anaphora_probe": "probe log-odds of the antecedent's gender at the masked pronoun",
        "prev_word_probe": "probe log-odds of the preceding determiner (the/a) at the noun",
        "delimiter_probe": "probe log-odds of the final punctuation (./!) at the verb",
    }
    for metric in descr:
        rows = np.array([i for i, lab in enumerate(labels) if metric in lab])
        pos = []
        for r in rows:
            if metric in read_word[r]:
                w = read_word[r][metric]
                pos.append(batch.token_to_word[r].index(w))  # first token of the word
            else:
                pos.append(int((tokens[r] == mask_id).nonzero()[0, 0]))
        lab = np.array([labels[r][metric] for r in rows])
        train = np.zeros(len(rows), dtype=bool)
        for value in (0, 1):  # half of each class trains the probe, the other half measures
            idx = rng.permutation(np.flatnonzero(lab == value))
            train[idx[: len(idx) // 2]] = True
        tasks[metric] = Task(metric, "probe", descr[metric], rows, pos=np.array(pos), label=lab, train=train)
    texts = [" ".join(w) for w in words]
    return PromptSet(
        tokens, attention_mask, texts, family, tasks, token_type_ids=getattr(batch, "token_type_ids", None)
    )


def build_prompts(model, n: int = 8, seed: int = 0) -> PromptSet:
    """Seeded prompts for the behaviour metrics: ``n`` per family (subject-verb, anaphora; plus
    ``n // 2`` punctuation texts and ``n // 2`` repeated random sequences for a causal LM, or ``n``
    plain sentences for an encoder)."""
    if n < 4:
        raise ValueError(f"n={n} prompts per family is too few (need at least 4: two per class)")
    if model.tokenizer is None:
        raise ValueError("build_prompts needs a model with a tokenizer attached")
    rng = np.random.default_rng(seed)
    if _is_lm(model):
        return _causal_prompts(model, n, rng)
    if not view(model).causal:
        return _encoder_prompts(model, n, rng)
    raise ValueError("a causal model without an LM head has no behaviour metric here")


# --------------------------------------------------------------------------------------------------
# Metrics


def role_metric(role: str, causal: bool) -> str | None:
    """The behaviour metric tied to a role (see the module docstring); None: no metric."""
    r = str(role).lower()
    if "subject" in r or r == "sv":
        return "sv_logit_diff" if causal else "sv_probe"
    if "anaphora" in r or "coref" in r:
        return "anaphora_logit_diff" if causal else "anaphora_probe"
    if any(k in r for k in ("delim", "punct", "sep", "eos", "end_of", "sentence")):
        return "delimiter_loss" if causal else "delimiter_probe"
    if "induction" in r or "duplicate" in r:
        return "induction_loss" if causal else None
    if any(k in r for k in ("local", "previous", "prev", "next", "self")):
        return "loss" if causal else "prev_word_probe"
    return "loss" if causal else None


def fit_probe(x: Tensor, y: np.ndarray, l2: float = 1e-3, steps: int = 200):
    """Logistic regression on standardised features (L-BFGS, L2 penalty). Returns a function
    features [n, d] -> logits [n]."""
    x = x.detach().double()
    mu, sd = x.mean(0), x.std(0) + 1e-6
    xs = (x - mu) / sd
    yt = torch.as_tensor(y, dtype=torch.float64)
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(xs @ w + b, yt) + l2 * (w * w).sum() / 2
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    w, b = w.detach(), b.detach()
    return lambda feats: ((feats.double() - mu) / sd) @ w + b


def metric_functions(prompts: PromptSet, clean_output: Tensor | None = None) -> dict[str, Callable]:
    """{metric: function(output) -> [batch] score, NaN for prompts the metric ignores}. Encoder
    probes are trained here on ``clean_output`` (required for them)."""
    batch = prompts.tokens.shape[0]
    funcs = {}
    memo: dict = {}

    def next_token_logp(out):  # shared by the loss metrics of one output: one log_softmax, not three
        if memo.get("out") is not out:
            target = prompts.tokens[:, 1:]
            memo["out"], memo["logp"] = out, out[:, :-1].float().log_softmax(-1).gather(-1, target[..., None])[..., 0]
        return memo["logp"]

    for name, task in prompts.tasks.items():
        rows = torch.as_tensor(task.rows, dtype=torch.long)
        if task.kind == "logit_diff":
            pos, right, wrong = (torch.as_tensor(a, dtype=torch.long) for a in (task.pos, task.right, task.wrong))

            def fn(out, rows=rows, pos=pos, right=right, wrong=wrong):
                s = torch.full((batch,), float("nan"))
                s[rows] = out[rows, pos, right].float() - out[rows, pos, wrong].float()  # fp32 in any model dtype
                return s
        elif task.kind == "loss":
            m = task.loss_mask.bool()

            def fn(out, m=m, rows=rows):
                logp = next_token_logp(out)
                mm = m[:, :-1].float()
                s = (logp * mm).sum(1) / mm.sum(1).clamp(min=1)
                s[mm.sum(1) == 0] = float("nan")
                keep = torch.full((batch,), float("nan"))
                keep[rows] = s[rows]
                return keep  # minus the loss: higher is better
        elif task.kind == "probe":
            if clean_output is None:
                raise ValueError(f"metric {name!r} is a probe: pass the clean run's output to train it")
            pos = torch.as_tensor(task.pos, dtype=torch.long)
            train = torch.as_tensor(task.train)
            sign = torch.as_tensor(2 * task.label - 1, dtype=torch.float64)
            probe = fit_probe(clean_output[rows[train], pos[train]], task.label[task.train])
            test_rows, test_pos, test_sign = rows[~train], pos[~train], sign[~train]

            def fn(out, probe=probe, r=test_rows, p=test_pos, sg=test_sign):
                s = torch.full((batch,), float("nan"))
                s[r] = (probe(out[r, p]) * sg).float()  # log-odds of the correct class
                return s
        else:
            raise ValueError(f"unknown task kind {task.kind!r}")
        funcs[name] = fn
    return funcs


# --------------------------------------------------------------------------------------------------
# Statistics and verdicts


def _effect_row(model: str, head: tuple[int, int], metric: str, effect: float, lo: float, hi: float, **more) -> dict:
    return dict(model=model, layer=head[0], head=head[1], metric=metric, effect=effect, ci_low=lo, ci_high=hi, **more)


def empirical_p(effect: float, null: Sequence[float]) -> float:
    """One-sided: the chance that a random head's effect is at least this large, with the +1
    correction (the observed head counts as one draw), so p >= 1 / (n_null + 1)."""
    null = np.asarray(null, dtype=float)
    null = null[np.isfinite(null)]
    return float((1 + np.sum(null >= effect)) / (1 + null.size))


def decide(
    effect: float, ci_low: float, ci_high: float, min_effect: float, p_value: float, alpha: float = 0.05
) -> tuple[str, str]:
    """(verdict, reason) by the rule in the module docstring."""
    if not np.isfinite(effect):
        return "inconclusive", "no prompt measured this metric"
    up = ci_low > 0 and effect >= min_effect
    down = ci_high < 0 and -effect >= min_effect
    if up and p_value <= alpha:
        return "validated", "ablation hurts, more than random heads"
    if not up and not down:
        return "pattern only", "no measurable effect of ablation"
    if down:
        return "inconclusive", "ablation helps the behaviour"
    return "inconclusive", "measurable effect, but random heads do as much"


@dataclass
class ValidationResult:
    table: pd.DataFrame  # one row per labelled (head, role), COLUMNS
    unlabelled: pd.DataFrame  # heads with large effects and no label tied to the metric
    effects: pd.DataFrame  # every evaluated head x metric: effect, ci, in_null
    info: dict = field(default_factory=dict)


def _labels_frame(labels: pd.DataFrame, n_layers: int | None = None, n_heads: int | None = None) -> pd.DataFrame:
    """The rows with ``label`` true, values checked (``check_labels``: the row, the column and what
    is expected), one row per (head, role)."""
    lab = check_labels(labels, n_layers, n_heads)
    lab = lab[lab["label"]]
    # several directions of one (head, role) are one hypothesis here: keep the best score
    lab = lab.sort_values("score", ascending=False, na_position="last").drop_duplicates(["layer", "head", "role"])
    return lab.reset_index(drop=True)


def _sharded_sweep(
    model, prompts: PromptSet, source: dict, funcs: dict, heads: list, kw: dict, world: World | None
) -> tuple[dict[str, np.ndarray], list[list[int]]]:
    """``iv.head_sweep`` over ``heads``, each worker ablating its share (head i: worker i % N) on every
    prompt (one padded batch, as in one process, so the numbers are the same bits); the rows are
    gathered back into the order of ``heads`` on every worker. Returns (scores, each worker's
    indices into ``heads``)."""
    world = world if world is not None else current()
    mine = list(world.shard(len(heads)))
    got = iv.head_sweep(
        model,
        prompts.tokens,
        source,
        funcs,
        heads=[heads[i] for i in mine],
        attention_mask=prompts.attention_mask,
        **kw,
    )
    if world.size == 1:
        return got, [mine]
    shares = world.gather((mine, got))
    dtypes = {m: np.result_type(*[values[m] for _, values in shares]) for m in funcs}  # as one process's
    out = {m: np.full((len(heads), prompts.tokens.shape[0]), np.nan, dtype=dtypes[m]) for m in funcs}
    seen = sorted(i for idx, _ in shares for i in idx)
    if seen != list(range(len(heads))):
        raise RuntimeError(f"the workers' shares of the {len(heads)} heads overlap or leave heads out")
    for idx, values in shares:
        for m in funcs:
            out[m][idx] = values[m]
    return out, [idx for idx, _ in shares]


@torch.no_grad()
def validate(
    model,
    labels: pd.DataFrame | None = None,
    prompts: PromptSet | None = None,
    n: int = 8,
    seed: int = 0,
    ablation: str = "mean",
    n_null: int | None = None,
    n_layer_null: int | None = None,
    max_heads_per_role: int | None = None,
    alpha: float = 0.05,
    n_boot: int = 1000,
    probe_n: int = 100,
    model_name: str | None = None,
    q_family: int | None = 8,
    world: World | None = None,
) -> ValidationResult:
    """Validate every labelled head causally.

    labels: a heads table (``analyses.heads.probe_heads`` schema; rows with ``label`` true are used;
        at least layer, head, role and label, checked by ``check_labels``; ``read_labels`` reads one
        from a CSV). None: computed with ``probe_heads(model, n=probe_n, seed=seed)``.
    prompts: ``build_prompts(model, n, seed)`` by default.
    n_null: random heads (from all layers) forming the null; None: every head.
    n_layer_null: random other heads per labelled layer for the per-layer null; None: all of them.
    max_heads_per_role: validate only the best-scoring labelled heads of each role (None: all).
    q_family: the ``q_value`` family of a role: its best ``q_family`` labels by probe score (None:
        all its labels).
    world: the workers (``interp.distributed``; default: this process's group, else one process).
        Every worker calls ``validate`` with the same arguments and builds the same prompts and clean
        run; the ablation sweep, one forward pass per head, is sharded by head (head i of the list:
        worker i % N) and the per-prompt scores are gathered, so every worker returns the table one
        process would, bitwise.
    """
    if ablation not in iv.ABLATIONS:
        raise ValueError(f"ablation {ablation!r} is unknown; use one of {iv.ABLATIONS}")
    name = model_name or view(model).name
    if labels is None:
        from analyses.heads import probe_heads  # lazily: heavy, and only needed without a table

        labels = probe_heads(model, n=probe_n, seed=seed)
    v = view(model)
    lab = _labels_frame(labels, v.n_layers, v.n_heads)
    causal = _is_lm(model)
    lab["metric"] = [role_metric(r, causal) for r in lab["role"]]
    lab = lab.sort_values(["role", "score"], ascending=[True, False], na_position="last")
    if max_heads_per_role is not None:
        lab = lab.groupby("role", sort=False).head(max_heads_per_role)
    lab = lab.reset_index(drop=True)
    iv.normalize_heads(model, list(zip(lab["layer"], lab["head"])))  # clear error for bad rows

    prompts = prompts or build_prompts(model, n=n, seed=seed)
    heads_all = iv.all_heads(model)
    rng = np.random.default_rng(seed)

    def pick(pool, k):
        return (
            list(pool)
            if k is None or k >= len(pool)
            else [pool[i] for i in sorted(rng.choice(len(pool), k, replace=False))]
        )

    null_pool = pick(heads_all, n_null)
    layer_pool = {}
    for layer in sorted(set(lab["layer"])):
        layer_pool[layer] = pick([(layer, h) for h in range(model.cfg.n_heads)], n_layer_null)
    tested = [(int(a), int(b)) for a, b in zip(lab["layer"], lab["head"])]
    heads = list(dict.fromkeys(tested + null_pool + [h for hs in layer_pool.values() for h in hs]))

    kw = prompts.forward_kwargs()
    clean_out, z = iv.cache_z(model, prompts.tokens, sorted({l for l, _ in heads}), **kw)
    funcs = metric_functions(prompts, clean_out)
    # a role whose metric these prompts do not measure has no behaviour to test
    lab["metric"] = pd.Series([m if m in funcs else None for m in lab["metric"]], index=lab.index, dtype=object)
    clean = {m: f(clean_out).numpy() for m, f in funcs.items()}
    source = iv.ablation_source(z, ablation, attention_mask=prompts.attention_mask, groups=prompts.family, seed=seed)
    scores, head_shards = _sharded_sweep(
        model, prompts, source, funcs, heads, {k: v for k, v in kw.items() if k != "attention_mask"}, world
    )

    # per head x metric: mean effect and bootstrap interval over the prompts that count
    eff, rows = {}, []
    min_eff = {}
    for m in funcs:
        task = prompts.tasks[m]
        c = clean[m]
        ok = np.isfinite(c)
        scale = float(np.mean(np.abs(c[ok]))) if ok.any() else float("nan")
        min_eff[m] = REL_MIN_EFFECT[task.kind] * scale
        per = c[None, ok] - scores[m][:, ok]  # [head, item]
        for i, h in enumerate(heads):
            e = float(per[i].mean()) if per.shape[1] else float("nan")
            lo, hi = bootstrap_ci(per[i], n_boot=n_boot, seed=seed) if per.shape[1] else (math.nan, math.nan)
            eff[(h, m)] = (e, lo, hi, int(ok.sum()))
            rows.append(
                _effect_row(
                    name,
                    h,
                    m,
                    e,
                    lo,
                    hi,
                    clean=float(np.mean(c[ok])) if ok.any() else math.nan,
                    min_effect=min_eff[m],
                    in_null=h in null_pool,
                )
            )
    effects = pd.DataFrame(rows)

    def null_stats(h, m, pool):
        vals = np.array([eff[(g, m)][0] for g in pool if g != h])
        return vals

    out = []
    for rec in lab.itertuples(index=False):
        h, m = (int(rec.layer), int(rec.head)), rec.metric
        base = dict(
            model=name,
            layer=h[0],
            head=h[1],
            role=rec.role,
            metric=m if isinstance(m, str) else "none",
            ablation=ablation,
            label_score=float(rec.score) if pd.notna(rec.score) else math.nan,
        )
        if not isinstance(m, str):
            out.append({**base, "verdict": "inconclusive", "reason": "no behaviour metric for this role"})
            continue
        e, lo, hi, n_items = eff[(h, m)]
        null = null_stats(h, m, null_pool)
        lnull = null_stats(h, m, layer_pool[h[0]])
        sd = float(null.std(ddof=1)) if null.size > 1 else math.nan
        out.append(
            {
                **base,
                "effect": e,
                "ci_low": lo,
                "ci_high": hi,
                "clean": float(np.nanmean(clean[m])),
                "min_effect": min_eff[m],
                "null_mean": float(null.mean()) if null.size else math.nan,
                "null_std": sd,
                "n_null": int(null.size),
                "z": (e - null.mean()) / sd if null.size > 1 and sd > 0 else math.nan,
                "p_value": empirical_p(e, null),
                "null_mean_layer": float(lnull.mean()) if lnull.size else math.nan,
                "p_value_layer": empirical_p(e, lnull),
                "n_null_layer": int(lnull.size),
                "n_items": n_items,
            }
        )
    table = pd.DataFrame(out, columns=COLUMNS)
    # Benjamini-Hochberg within each role (the probe's families are per role too), over the role's
    # q_family best-scoring labels by probe score: a family fixed before any ablation, small enough
    # that a head beating every random head (p = 1/(n_null+1)) can reach q <= 0.05; the other
    # labelled heads keep their p-value and verdict, with no q
    for _, idx in table.groupby("role").groups.items():
        sub = table.loc[idx]
        sub = sub[sub["p_value"].notna()].sort_values("label_score", ascending=False, na_position="last")
        family = sub.index[:q_family] if q_family is not None else sub.index
        if len(family):
            table.loc[family, "q_value"] = bh(table.loc[family, "p_value"].to_numpy())
    # a probe that does not read the behaviour on clean held-out prompts cannot show its loss
    unreadable = {m for m in funcs if prompts.tasks[m].kind == "probe" and not np.nanmean(clean[m]) > 0}
    verdicts = [
        (r["verdict"], r["reason"])
        if r["reason"] == "no behaviour metric for this role"
        else ("inconclusive", "the probe fails on clean held-out prompts (mean log-odds <= 0)")
        if r["metric"] in unreadable
        else decide(r["effect"], r["ci_low"], r["ci_high"], r["min_effect"], r["p_value"], alpha)
        for _, r in table.iterrows()
    ]
    table["verdict"] = pd.Series([v for v, _ in verdicts], index=table.index, dtype=object)
    table["reason"] = pd.Series([why for _, why in verdicts], index=table.index, dtype=object)

    # the other direction: heads with large effects on a metric and no label tied to it
    labelled_for = {
        (int(a), int(b), m) for a, b, m in zip(lab["layer"], lab["head"], lab["metric"]) if isinstance(m, str)
    }
    labels_of = {}
    for a, b, r in zip(lab["layer"], lab["head"], lab["role"]):
        labels_of.setdefault((int(a), int(b)), []).append(str(r))
    extra = []
    for (h, m), (e, lo, hi, _n_items) in eff.items():
        if (h[0], h[1], m) in labelled_for:
            continue
        null = null_stats(h, m, null_pool)
        p = empirical_p(e, null)
        if lo > 0 and e >= min_eff[m] and p <= alpha:
            extra.append(
                _effect_row(
                    name,
                    h,
                    m,
                    e,
                    lo,
                    hi,
                    null_mean=float(null.mean()),
                    p_value=p,
                    other_labels=",".join(labels_of.get(h, [])),
                )
            )
    unlabelled = pd.DataFrame(
        extra,
        columns=[
            "model",
            "layer",
            "head",
            "metric",
            "effect",
            "ci_low",
            "ci_high",
            "null_mean",
            "p_value",
            "other_labels",
        ],
    )
    unlabelled = unlabelled.sort_values("effect", ascending=False).reset_index(drop=True)
    info = dict(
        model=name,
        ablation=ablation,
        seed=seed,
        workers=len(head_shards),
        head_shards=head_shards,  # indices into the evaluated heads, per worker
        n_prompts=int(prompts.tokens.shape[0]),
        n_heads_evaluated=len(heads),
        n_null=len(null_pool),
        n_layer_null=n_layer_null,
        alpha=alpha,
        max_heads_per_role=max_heads_per_role,
        metrics={m: prompts.tasks[m].description for m in funcs},
        clean_accuracy={
            m: float(np.mean(clean[m][np.isfinite(clean[m])] > 0)) for m in funcs if prompts.tasks[m].kind == "probe"
        },
        clean={m: float(np.nanmean(v)) for m, v in clean.items()},
        n_labels=len(lab),
    )
    return ValidationResult(table, unlabelled, effects, info)


# --------------------------------------------------------------------------------------------------
# A planted model: one head is the only path for the information the output needs


def planted_model(n_layers: int = 2, n_heads: int = 24, vocab: int = 12, n_ctx: int = 12, seed: int = 0):
    """A causal attention-only model whose weights are set by hand.

    Residual stream = [token one-hot (vocab) | position one-hot (n_ctx) | "previous token" slot (vocab)].
    Head (0, 0), **A**, attends from position p to p-1 (queries and keys read the position one-hots),
    copies the token there (W_V) into the previous-token slot (W_O); the unembedding reads only that
    slot, so on period-2 sequences (a b a b ...) A alone predicts the next token. Head (0, 1),
    **B**, is a decoy with A's W_Q, W_K, W_V, hence the same attention pattern, and W_O = 0. Every
    other head has small random weights (seeded), so random-head ablations have a spread of small
    effects. MLPs are zero. Returns (model, {"A": (0, 0), "B": (0, 1)})."""
    import models  # analyses may use models; imported here so the module stays light

    d_model = 2 * vocab + n_ctx
    cfg = models.Config(
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        d_head=max(vocab, n_ctx),
        d_mlp=4,
        d_vocab=vocab,
        n_ctx=n_ctx,
        norm="rmsnorm",
        attn_scale=1.0,
        name="planted",
    )
    model = models.Transformer(cfg, seed=seed).eval()
    gen = torch.Generator().manual_seed(seed)
    tok, pos, prev = 0, vocab, vocab + n_ctx
    with torch.no_grad():
        model.W_E.zero_()
        model.W_E[torch.arange(vocab), tok + torch.arange(vocab)] = 1.0
        model.W_pos.zero_()
        model.W_pos[torch.arange(n_ctx), pos + torch.arange(n_ctx)] = 1.0
        for block in model.blocks:
            attn = block.attn
            shape_q, shape_o = attn.W_Q.shape, attn.W_O.shape
            attn.W_Q = torch.randn(shape_q, generator=gen) * 0.3
            attn.W_K = torch.randn(attn.W_K.shape, generator=gen) * 0.3
            attn.W_V = torch.randn(attn.W_V.shape, generator=gen) * 0.3
            attn.W_O = torch.randn(shape_o, generator=gen) * 0.02
            block.mlp.W_in = torch.zeros_like(block.mlp.W_in)
            block.mlp.W_out = torch.zeros_like(block.mlp.W_out)
        attn = model.blocks[0].attn
        wq = torch.zeros(d_model, cfg.d_head)
        wk = torch.zeros(d_model, cfg.d_head)
        wv = torch.zeros(d_model, cfg.d_head)
        wo = torch.zeros(cfg.d_head, d_model)
        for p in range(n_ctx):
            wq[pos + p, p] = 1.0  # query at p asks for basis p
            if p + 1 < n_ctx:
                wk[pos + p, p + 1] = 1.0  # key at j answers to query j+1
        for t in range(vocab):
            wv[tok + t, t] = 1.0
            wo[t, prev + t] = 1.0
        for h in (0, 1):
            attn.W_Q[h] = wq
            attn.W_K[h] = wk
            attn.W_V[h] = wv
        attn.W_O[0] = wo
        attn.W_O[1] = torch.zeros_like(wo)  # the decoy: same pattern, writes nothing
        model.unembed_weight.zero_()
        model.unembed_weight[torch.arange(vocab), prev + torch.arange(vocab)] = 5.0
    return model, {"A": (0, 0), "B": (0, 1)}


def planted_prompts(n: int = 16, length: int = 12, vocab: int = 12, seed: int = 0) -> PromptSet:
    """Period-2 sequences (a b a b ...) with a != b, seeded: from position 1 on the next token equals
    the previous one, which only head A of ``planted_model`` carries."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        a, b = rng.choice(vocab, 2, replace=False)
        rows.append([a if i % 2 == 0 else b for i in range(length)])
    tokens = torch.as_tensor(np.array(rows), dtype=torch.long)
    mask = torch.ones_like(tokens)
    loss_mask = torch.zeros_like(tokens, dtype=torch.bool)
    loss_mask[:, 1:-1] = True  # predictions made at positions 1 .. length-2
    task = Task("loss", "loss", "minus next-token loss on period-2 sequences", np.arange(n), loss_mask=loss_mask)
    return PromptSet(tokens, mask, [" ".join(map(str, r)) for r in rows], ["planted"] * n, {"loss": task})


# --------------------------------------------------------------------------------------------------
# Labels from patterns alone, for the two best-known roles (a fallback when no heads table exists)


@torch.no_grad()
def pattern_labels(
    model, prompts: PromptSet | None = None, top: int = 4, threshold: float = 0.3, seed: int = 0
) -> pd.DataFrame:
    """previous_token and induction labels read off the attention patterns on repeated random token
    sequences: previous-token score = mean weight from position p to p-1; induction score = mean
    weight from a token of the second copy to the token after its first occurrence. A head is
    labelled when its score is among the ``top`` of its role and above ``threshold``. Returns the
    heads-table schema (model, layer, head, role, direction, score, label)."""
    n_layers, n_heads = int(model.cfg.n_layers), int(model.cfg.n_heads)
    if prompts is not None and "induction_loss" in prompts.tasks:
        rows = prompts.tasks["induction_loss"].rows
        tokens = prompts.tokens[torch.as_tensor(rows)]
        half = int(prompts.attention_mask[rows[0]].sum()) // 2
        tokens = tokens[:, : 2 * half]
    else:
        half = 6
        tokens = _repeated(model, 8, half, np.random.default_rng(seed))
    names = [act_name(layer, "attn.hook_pattern") for layer in range(n_layers)]
    _, cache = model.run_with_cache(tokens, names_filter=names)
    q = torch.arange(1, 2 * half)
    qi = torch.arange(half, 2 * half)
    rows = []
    for layer, name in enumerate(names):
        pat = cache[name].float()  # [batch, head, query_pos, key_pos]; averaged in fp32 whatever the model's dtype
        prev = pat[:, :, q, q - 1].mean((0, 2))
        ind = pat[:, :, qi, qi - half + 1].mean((0, 2))
        for head in range(n_heads):
            rows.append(dict(layer=layer, head=head, role="previous_token", score=float(prev[head])))
            rows.append(dict(layer=layer, head=head, role="induction", score=float(ind[head])))
    df = pd.DataFrame(rows)
    df["model"] = view(model).name
    df["direction"] = "back"
    rank = df.groupby("role")["score"].rank(ascending=False, method="first")
    df["label"] = (rank <= top) & (df["score"] > threshold)
    return df[["model", "layer", "head", "role", "direction", "score", "label"]]
