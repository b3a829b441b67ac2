"""The prompts of causal validation: seeded prompt sets whose ``Task``s say what each behaviour
metric reads (``analyses.validation.metrics`` turns them into score functions).

A causal LM gets subject-verb prompts with an attractor, anaphora prompts, punctuation-rich text and
repeated random token sequences (``build_prompts``); an encoder gets masked sentences whose final
states linear probes read. ``planted_prompts`` are the period-2 sequences of the planted model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from analyses.data.generated import random_repeated_tokens
from analyses.data.items import is_punctuation
from interp.view import view

__all__ = ["Task", "PromptSet", "build_prompts", "planted_prompts", "is_lm", "repeated_tokens"]


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


def is_lm(model) -> bool:
    """A causal model with next-token logits (the metrics that read logits need one)."""
    v = view(model)
    return v.causal and v.lm_head


def repeated_tokens(model, n: int, half: int, rng: np.random.Generator) -> Tensor:
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


def _causal_texts(tok, n: int, rng: np.random.Generator) -> tuple[list, list, list]:
    """The natural prompts, drawn from ``rng`` in this order: ``n`` subject-verb, ``n`` anaphora,
    ``max(2, n // 2)`` punctuation-rich texts. Returns (texts, family, meta): meta is a prompt's
    (right, wrong) token ids, None for the texts."""
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
    return texts, family, meta


def _padded(x: Tensor, m: Tensor, width: int, pad: int) -> tuple[Tensor, Tensor]:
    return (F.pad(x, (0, width - x.shape[1]), value=pad), F.pad(m, (0, width - m.shape[1]), value=False))


def _logit_diff_tasks(fam: np.ndarray, last: np.ndarray, meta: list) -> dict[str, Task]:
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
    return tasks


def _loss_tasks(tok, tokens: Tensor, attention_mask: Tensor, fam: np.ndarray, half: int) -> dict[str, Task]:
    """loss (the natural prompts), delimiter_loss (after punctuation in the texts), induction_loss
    (the second copy of the repeated sequences, ``half`` tokens each)."""
    tasks = {}
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
    return tasks


def _causal_prompts(model, n: int, rng: np.random.Generator) -> PromptSet:
    tok = model.tokenizer
    texts, family, meta = _causal_texts(tok, n, rng)
    batch = tok(texts)
    ids, mask = batch.input_ids, batch.attention_mask.bool()
    # repeated random token sequences (induction); drawn from mid-frequency ids, same length
    n_rep, half = max(2, n // 2), 6
    rep = repeated_tokens(model, n_rep, half, rng)
    width = max(ids.shape[1], rep.shape[1])
    pad = tok.pad_token_id
    ids, mask = _padded(ids, mask, width, pad)
    rep_ids, rep_mask = _padded(rep, torch.ones_like(rep, dtype=torch.bool), width, pad)
    tokens = torch.cat([ids, rep_ids])
    attention_mask = torch.cat([mask, rep_mask])
    texts = texts + [tok.decode(r) for r in rep.tolist()]
    family = family + ["repeat"] * n_rep
    fam = np.array(family)
    last = attention_mask.sum(1).numpy() - 1
    tasks = _logit_diff_tasks(fam, last, meta)
    tasks.update(_loss_tasks(tok, tokens, attention_mask, fam, half))
    return PromptSet(tokens, attention_mask.long(), texts, family, tasks)


def _encoder_words(n: int, rng: np.random.Generator) -> tuple[list, list, list, list]:
    """``n`` subject-verb, ``n`` anaphora and ``n`` plain sentences as words, drawn from ``rng`` in
    that order. Returns (words, family, labels: {metric: class}, read_word: {metric: the word index
    the probe reads; absent: the [MASK]})."""
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
    return words, family, labels, read_word


_PROBE_TASKS = {
    "sv_probe": "probe log-odds of the subject's number at the masked verb",
    "anaphora_probe": "probe log-odds of the antecedent's gender at the masked pronoun",
    "prev_word_probe": "probe log-odds of the preceding determiner (the/a) at the noun",
    "delimiter_probe": "probe log-odds of the final punctuation (./!) at the verb",
}


def _probe_tasks(batch, labels: list, read_word: list, mask_id: int, rng: np.random.Generator) -> dict[str, Task]:
    """One probe task per metric: where it reads (a word's first token, or the [MASK]), the class,
    and a train/test split drawn from ``rng`` (half of each class trains the probe)."""
    tokens, tasks = batch.input_ids, {}
    for metric, what in _PROBE_TASKS.items():
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
        tasks[metric] = Task(metric, "probe", what, rows, pos=np.array(pos), label=lab, train=train)
    return tasks


def _encoder_prompts(model, n: int, rng: np.random.Generator) -> PromptSet:
    tok = model.tokenizer
    mask_id = getattr(tok.hf, "mask_token_id", None)
    if mask_id is None:
        raise ValueError("encoder probes need a tokenizer with a [MASK] token")
    words, family, labels, read_word = _encoder_words(n, rng)
    batch = tok.words(words)
    tasks = _probe_tasks(batch, labels, read_word, mask_id, rng)
    texts = [" ".join(w) for w in words]
    return PromptSet(
        batch.input_ids,
        batch.attention_mask,
        texts,
        family,
        tasks,
        token_type_ids=getattr(batch, "token_type_ids", None),
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
    if is_lm(model):
        return _causal_prompts(model, n, rng)
    if not view(model).causal:
        return _encoder_prompts(model, n, rng)
    raise ValueError("a causal model without an LM head has no behaviour metric here")


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
