"""The behaviour metrics of causal validation, and which one tests each head role.

Every metric is a per-prompt score where higher is better; an ablation's **effect** is
``clean score - ablated score`` averaged over the prompts that count, so a positive effect means the
head helps the behaviour:

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

Roles -> metrics: the table ``ROLE_METRICS`` (every role ``analyses.heads`` can label, under the
name it is validated under (``labels.role_names``: "subject_verb (predictive)"), with its causal
and its encoder metric; None: no metric; an encoder has no predictive reading); a role outside the
table (a hand-written labels file) gets ``OTHER_ROLE``: the causal LM's loss, no encoder metric.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from analyses.validation.prompts import PromptSet, Task

__all__ = ["ROLE_METRICS", "OTHER_ROLE", "REL_MIN_EFFECT", "role_metric", "fit_probe", "metric_functions"]

# role -> (metric on a causal LM, metric on an encoder); None: the role has no behaviour metric there
ROLE_METRICS: dict[str, tuple[str | None, str | None]] = {
    "subject_verb": ("sv_logit_diff", "sv_probe"),
    "anaphora": ("anaphora_logit_diff", "anaphora_probe"),
    "delimiter": ("delimiter_loss", "delimiter_probe"),
    "punctuation": ("delimiter_loss", "delimiter_probe"),
    "sep_eos": ("delimiter_loss", "delimiter_probe"),
    "induction": ("induction_loss", None),
    "duplicate_token": ("induction_loss", None),
    "local": ("loss", "prev_word_probe"),
    "previous_token": ("loss", "prev_word_probe"),
    "next_token": ("loss", "prev_word_probe"),
    "self_token": ("loss", "prev_word_probe"),
    "attention_sink": ("loss", None),
    "learned_sink": ("loss", None),
    "broad": ("loss", None),
    "rhyme": ("loss", None),
    "line_structure": ("loss", None),
    "noop_sink": ("loss", None),
    # labels v4: a relation read both ways is two roles (``analyses.heads.roles.label_name``), each
    # tested on its relation's behaviour; IOI's logit difference is the powered run's (these prompts
    # have none)
    "subject_verb (retrospective)": ("sv_logit_diff", "sv_probe"),
    "subject_verb (predictive)": ("sv_logit_diff", None),
    "anaphora (retrospective)": ("anaphora_logit_diff", "anaphora_probe"),
    "anaphora (predictive)": ("anaphora_logit_diff", None),
    "ioi": (None, None),
    "ioi (predictive)": (None, None),
}
OTHER_ROLE: tuple[str | None, str | None] = ("loss", None)
# the smallest |effect| that counts, relative to the metric's scale (see analyses.validation.verdicts)
REL_MIN_EFFECT = {"logit_diff": 0.05, "probe": 0.05, "loss": 0.005}


def role_metric(role: str, causal: bool) -> str | None:
    """The behaviour metric tied to a role (``ROLE_METRICS``, case-insensitive; ``OTHER_ROLE`` for a
    role outside it) on a causal LM (``causal``) or an encoder; None: no metric."""
    pair = ROLE_METRICS.get(str(role).lower(), OTHER_ROLE)
    return pair[0] if causal else pair[1]


def fit_probe(x: Tensor, y: np.ndarray, l2: float = 1e-3, steps: int = 200) -> Callable[[Tensor], Tensor]:
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


def _next_token_logp(prompts: PromptSet) -> Callable[[Tensor], Tensor]:
    """output -> log p(next token) [batch, pos - 1], remembered for the last output: the loss
    metrics of one output share one log_softmax, not three."""
    memo: dict = {}

    def next_token_logp(out):
        if memo.get("out") is not out:
            target = prompts.tokens[:, 1:]
            memo["out"], memo["logp"] = out, out[:, :-1].float().log_softmax(-1).gather(-1, target[..., None])[..., 0]
        return memo["logp"]

    return next_token_logp


def _logit_diff_metric(task: Task, batch: int) -> Callable[[Tensor], Tensor]:
    rows = torch.as_tensor(task.rows, dtype=torch.long)
    pos, right, wrong = (torch.as_tensor(a, dtype=torch.long) for a in (task.pos, task.right, task.wrong))

    def fn(out, rows=rows, pos=pos, right=right, wrong=wrong):
        s = torch.full((batch,), float("nan"))
        s[rows] = out[rows, pos, right].float() - out[rows, pos, wrong].float()  # fp32 in any model dtype
        return s

    return fn


def _loss_metric(task: Task, batch: int, next_token_logp: Callable) -> Callable[[Tensor], Tensor]:
    rows = torch.as_tensor(task.rows, dtype=torch.long)
    m = task.loss_mask.bool()

    def fn(out, m=m, rows=rows):
        logp = next_token_logp(out)
        mm = m[:, :-1].float()
        s = (logp * mm).sum(1) / mm.sum(1).clamp(min=1)
        s[mm.sum(1) == 0] = float("nan")
        keep = torch.full((batch,), float("nan"))
        keep[rows] = s[rows]
        return keep  # minus the loss: higher is better

    return fn


def _probe_metric(name: str, task: Task, batch: int, clean_output: Tensor | None) -> Callable[[Tensor], Tensor]:
    if clean_output is None:
        raise ValueError(f"metric {name!r} is a probe: pass the clean run's output to train it")
    rows = torch.as_tensor(task.rows, dtype=torch.long)
    pos = torch.as_tensor(task.pos, dtype=torch.long)
    train = torch.as_tensor(task.train)
    sign = torch.as_tensor(2 * task.label - 1, dtype=torch.float64)
    probe = fit_probe(clean_output[rows[train], pos[train]], task.label[task.train])
    test_rows, test_pos, test_sign = rows[~train], pos[~train], sign[~train]

    def fn(out, probe=probe, r=test_rows, p=test_pos, sg=test_sign):
        s = torch.full((batch,), float("nan"))
        s[r] = (probe(out[r, p]) * sg).float()  # log-odds of the correct class
        return s

    return fn


def metric_functions(prompts: PromptSet, clean_output: Tensor | None = None) -> dict[str, Callable]:
    """{metric: function(output) -> [batch] score, NaN for prompts the metric ignores}. Encoder
    probes are trained here on ``clean_output`` (required for them)."""
    batch = prompts.tokens.shape[0]
    next_token_logp = _next_token_logp(prompts)
    funcs = {}
    for name, task in prompts.tasks.items():
        if task.kind == "logit_diff":
            funcs[name] = _logit_diff_metric(task, batch)
        elif task.kind == "loss":
            funcs[name] = _loss_metric(task, batch, next_token_logp)
        elif task.kind == "probe":
            funcs[name] = _probe_metric(name, task, batch, clean_output)
        else:
            raise ValueError(f"unknown task kind {task.kind!r}")
    return funcs
