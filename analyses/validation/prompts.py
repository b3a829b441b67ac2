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
from analyses.data.ioi import ioi_pair as _ioi_pair  # the IOI forms and draw: shared with the probe's items
from analyses.data.items import is_punctuation
from analyses.data.lexicon import GENDER_PAIRS as _GENDER
from analyses.data.lexicon import GENDER_PLURALS as _GENDER_PL
from analyses.data.lexicon import IOI_NAMES as _IOI_NAMES
from analyses.data.lexicon import MEET_VERBS as _MEET_VERBS
from analyses.data.lexicon import PAIR_GENDER_PAIRS as _PAIR_GENDER
from analyses.data.lexicon import PAIR_SV_ATTRACTORS as _PAIR_SV_ATTR
from analyses.data.lexicon import PAIR_SV_PEOPLE as _PAIR_SV_PEOPLE
from analyses.data.lexicon import PAIR_SV_RC_VERBS as _PAIR_SV_RC_VERBS
from analyses.data.lexicon import PAIR_SV_SUBJECTS as _PAIR_SV_SUBJ
from analyses.data.lexicon import PERSON_PREPOSITIONS as _PREPS_PERSON
from analyses.data.lexicon import PROMPT_NOUNS as _NOUNS
from analyses.data.lexicon import PROMPT_PAST_VERBS as _VERBS
from analyses.data.lexicon import PROMPT_PERSON_PREDICATES as _VP
from analyses.data.lexicon import PROMPT_SV_ATTRACTORS as _SV_ATTR
from analyses.data.lexicon import PROMPT_SV_PREPOSITIONS as _SV_PREP
from analyses.data.lexicon import PROMPT_SV_SUBJECTS as _SV_SUBJ
from analyses.data.lexicon import REFLEXIVE_VERBS as _REFLEXIVE_VERBS
from analyses.tasks import TASKS, check_task
from interp.pairs import Pairs, logit_diff
from interp.view import view

__all__ = [
    "Task",
    "PromptSet",
    "build_prompts",
    "planted_prompts",
    "is_lm",
    "repeated_tokens",
    "PAIR_TASKS",
    "PairSet",
    "contrastive_pairs",
    "pair_logit_diff",
    "solved",
]


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
    input: str = "as given"  # the input convention of the texts (``analyses.heads.model_input``)

    def forward_kwargs(self) -> dict:
        kw = {"attention_mask": self.attention_mask}
        if self.token_type_ids is not None:
            kw["token_type_ids"] = self.token_type_ids
        return kw


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
    """The natural prompts under the model's input convention (``_input_of``: a sink token first
    where the tokenizer adds none), then the repeated random token sequences as the probe reads
    them (no sink token)."""
    _, tok, convention = _input_of(model.tokenizer)
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
    return PromptSet(tokens, attention_mask.long(), texts, family, tasks, input=convention)


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
    _, tok, convention = _input_of(model.tokenizer)  # an encoder's own [CLS] ... [SEP]
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
        input=convention,
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


# --------------------------------------------------------------------------------------------------
# Contrastive pairs (clean / corrupted prompts of the same length), shared with analyses.circuits
# --------------------------------------------------------------------------------------------------

PAIR_TASKS = TASKS  # the one task list (analyses.tasks)


@dataclass(frozen=True, eq=False, kw_only=True)
class PairSet(Pairs):
    """Contrastive prompt pairs of one task: a ``Pairs`` (clean and corrupted ids of the same length,
    one ``attention_mask`` with right padding, ``position`` the answer's position (the last real
    token), ``right`` and ``wrong``, ``held_out``: pairs kept out of circuit selection) plus its
    text. ``logit(right) - logit(wrong)`` at ``position`` is positive on clean when the model does
    the task; the corruption moves the cue (see ``contrastive_pairs``), so on ``corrupted`` it is
    negative (``subject_verb``, ``pronoun_gender``, ``induction``) or near zero (``ioi``'s ABC
    corruption, as in Wang et al. 2022). ``attractor``: subject-verb pairs with a noun of the other
    number between subject and verb (False for the other tasks). ``template``: which form each pair
    comes from. Indexing (``pairs[mask]``, ``subset``) keeps the text with the ids. ``input``: the
    model's input convention the ids follow (``analyses.heads.model_input``: "prepend <|endoftext|>"
    on SmolLM2), for the info of every output built on them."""

    task: str
    attractor: Tensor  # [n] bool
    template: list
    clean_texts: list
    corrupted_texts: list
    input: str = "as given"

    def logit_diff(self, logits: Tensor, rows: Tensor | None = None) -> Tensor:
        """[n] ``interp.pairs.logit_diff`` (fp32, on the CPU) from logits [n, pos, vocab] of these
        pairs (``rows``: the pairs a batch of logits holds; default all)."""
        return logit_diff(logits, self if rows is None else self[torch.as_tensor(rows).long()]).cpu()


def _hf_of(tokenizer):
    """(the Hugging Face tokenizer, the toolkit's ``Tokenizer`` around it) of either kind."""
    from models.tokenizer import Tokenizer  # analyses may use models

    if isinstance(tokenizer, Tokenizer):
        return tokenizer.hf, tokenizer
    if hasattr(tokenizer, "encode") and getattr(tokenizer, "is_fast", False):
        return tokenizer, Tokenizer(tokenizer)
    raise TypeError(
        f"contrastive_pairs needs a tokenizer (models.Tokenizer, e.g. model.tokenizer, or a fast Hugging Face "
        f"tokenizer), got {type(tokenizer).__name__}"
    )


def _input_of(tokenizer) -> tuple:
    """(the Hugging Face tokenizer, the ``Tokenizer`` of the model's input convention, the convention
    in words): ``analyses.heads.model_input`` of ``tokenizer`` (either kind)."""
    from analyses.heads.adapter import model_input  # lazily: the heads room is heavy to import

    hf, tok = _hf_of(tokenizer)
    tok, convention = model_input(tok)
    return hf, tok, convention


def _one_token(hf, word: str) -> int | None:
    """The id of `` word`` (with its leading space, as it follows another word) if it is one token."""
    ids = hf.encode(" " + word, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def _single_token_words(hf, words, what: str, need: int) -> list:
    """The entries of ``words`` (a word, or a tuple of words) whose every word is one token."""
    keep = [w for w in words if all(_one_token(hf, x) is not None for x in (w if isinstance(w, tuple) else (w,)))]
    if len(keep) < need:
        raise ValueError(
            f"only {len(keep)} {what} are single tokens in this tokenizer (need at least {need}); "
            "contrastive pairs swap single-token words so that clean and corrupted have the same length"
        )
    return keep


def _sv_pair(rng, i: int, words: dict) -> tuple:
    """One subject-verb pair: the subject's number alternates with ``i`` and so does the attractor
    flag (every 2): with an attractor, the noun between subject and verb has the other number. The
    corruption flips the subject's number only."""
    plural, attractor = i % 2, (i // 2) % 2 == 1
    attr_plural = 1 - plural if attractor else plural
    s = words["subj"][rng.integers(len(words["subj"]))]
    if rng.random() < 0.6:  # a prepositional phrase: "The keys near the cabinet"
        a = words["attr"][rng.integers(len(words["attr"]))]
        form, tail = "pp", f" {_SV_PREP[rng.integers(len(_SV_PREP))]} the {a[attr_plural]}"
    else:  # an object relative clause: "The keys that the man found"
        a = words["people"][rng.integers(len(words["people"]))]
        form, tail = "rc", f" that the {a[attr_plural]} {_PAIR_SV_RC_VERBS[rng.integers(len(_PAIR_SV_RC_VERBS))]}"
    clean, corrupted = f"The {s[plural]}{tail}", f"The {s[1 - plural]}{tail}"
    is_, are = words["is"], words["are"]
    right, wrong = (are, is_) if plural else (is_, are)
    return clean, corrupted, right, wrong, attractor, form


def _pronoun_pair(rng, i: int, words: dict) -> tuple:
    """One pronoun-gender pair: a male and a female antecedent; the reflexive after the verb binds to
    the subject of its clause ({A}), so the right pronoun is defined; the other person ({B}) is in a
    relative clause, a prepositional phrase, an earlier clause or the matrix clause. The corruption
    swaps the two people."""
    g = i % 2  # the subject's gender: 0 male, 1 female
    pa = words["gender"][rng.integers(len(words["gender"]))]
    pb = words["gender"][rng.integers(len(words["gender"]))]
    a, b = pa[g], pb[1 - g]
    rv = _REFLEXIVE_VERBS[rng.integers(len(_REFLEXIVE_VERBS))]
    form = ("rc", "pp", "after", "said")[rng.integers(4)]
    templ = {
        "rc": f"The {{A}} who {_MEET_VERBS[rng.integers(len(_MEET_VERBS))]} the {{B}} {rv}",
        "pp": f"The {{A}} {_PREPS_PERSON[rng.integers(len(_PREPS_PERSON))]} the {{B}} {rv}",
        "after": f"After the {{B}} left, the {{A}} {rv}",
        "said": f"The {{B}} said that the {{A}} {rv}",
    }[form]
    clean, corrupted = templ.format(A=a, B=b), templ.format(A=b, B=a)
    him, her = words["himself"], words["herself"]
    right, wrong = (her, him) if g else (him, her)
    return clean, corrupted, right, wrong, False, form


def _text_pairs(task: str, hf, tok, n: int, rng: np.random.Generator) -> tuple:
    """n distinct text pairs of a word task, tokenised. Returns (clean, corrupted, mask, answer_pos,
    right, wrong, attractor, template, clean_texts, corrupted_texts)."""
    words = {}
    if task == "subject_verb":
        words["subj"] = _single_token_words(hf, _PAIR_SV_SUBJ, "subject nouns (both numbers)", 4)
        words["attr"] = _single_token_words(hf, _PAIR_SV_ATTR, "attractor nouns (both numbers)", 2)
        words["people"] = _single_token_words(hf, _PAIR_SV_PEOPLE, "relative-clause nouns", 1)
        make = _sv_pair
    elif task == "pronoun_gender":
        words["gender"] = _single_token_words(hf, _PAIR_GENDER, "male/female noun pairs", 4)
        make = _pronoun_pair
    else:
        words["names"] = _single_token_words(hf, _IOI_NAMES, "names", 6)
        words["id"] = {w: _one_token(hf, w) for w in words["names"]}
        make = _ioi_pair
    for w in {"subject_verb": ("is", "are"), "pronoun_gender": ("himself", "herself")}.get(task, ()):
        words[w] = _one_token(hf, w)
        if words[w] is None:
            raise ValueError(f"' {w}' is not one token in this tokenizer; the {task} answers must be single tokens")
    rows, seen, misses = [], set(), 0
    while len(rows) < n:
        row = make(rng, len(rows), words)
        if row[0] in seen:
            misses += 1
            if misses > 2000:  # in a row: the forms are used up
                raise ValueError(f"could not draw {n} distinct {task} pairs (got {len(rows)}); ask for fewer")
            continue
        seen.add(row[0])
        rows.append(row)
        misses = 0
    clean_texts, corrupted_texts = [r[0] for r in rows], [r[1] for r in rows]
    cb, kb = tok(clean_texts), tok(corrupted_texts)
    if cb.input_ids.shape != kb.input_ids.shape or not torch.equal(cb.attention_mask, kb.attention_mask):
        raise RuntimeError(f"{task}: clean and corrupted prompts tokenised to different lengths")
    answer_pos = cb.attention_mask.sum(1) - 1 - len(_affixes(hf, tok)[1])
    right = torch.tensor([r[2] for r in rows])
    wrong = torch.tensor([r[3] for r in rows])
    attractor = torch.tensor([r[4] for r in rows], dtype=torch.bool)
    return (
        cb.input_ids,
        kb.input_ids,
        cb.attention_mask.long(),
        answer_pos.long(),
        right,
        wrong,
        attractor,
        [r[5] for r in rows],
        clean_texts,
        corrupted_texts,
    )


def _affixes(hf, tok) -> tuple[list, list]:
    """(the ids the toolkit's tokenizer puts before a text, those it puts after): BOS or [CLS]
    before, [SEP] after, or nothing."""
    text = "The dog"
    ids = tok(text).input_ids[0].tolist()
    body = hf.encode(text, add_special_tokens=False)
    for start in range(len(ids) - len(body) + 1):
        if ids[start : start + len(body)] == body:
            return ids[:start], ids[start + len(body) :]
    raise RuntimeError("could not find a text's own tokens inside its tokenisation")


def _induction_pairs(hf, tok, n: int, rng: np.random.Generator, length: int = 12) -> tuple:
    """Random tokens x (``length`` distinct mid-frequency ids) followed by x[:k], k in 3..length-1:
    the answer is x[k]. The corruption replaces x[k] in the first copy by a token w absent from x, so
    an induction head then predicts w (the contrast). Every pair has the same length."""
    prefix, suffix = _affixes(hf, tok)
    vocab = len(hf)
    lo, hi = min(1000, vocab // 4), min(5000, vocab)
    special = set(hf.all_special_ids)
    clean, corrupted, ks, right, wrong = [], [], [], [], []
    for _ in range(n):
        draw = rng.choice(np.arange(lo, hi), length + 1, replace=False)
        while special & set(draw.tolist()):
            draw = rng.choice(np.arange(lo, hi), length + 1, replace=False)
        x, w = draw[:length].tolist(), int(draw[length])
        k = int(rng.integers(3, length))
        y = list(x)
        y[k] = w
        clean.append(x + x[:k])
        corrupted.append(y + x[:k])
        ks.append(k)
        right.append(x[k])
        wrong.append(w)
    width = len(prefix) + length + max(ks) + len(suffix)
    pad = tok.pad_token_id
    ids_c = torch.full((n, width), pad, dtype=torch.long)
    ids_k = torch.full((n, width), pad, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i in range(n):
        c, kk = prefix + clean[i] + suffix, prefix + corrupted[i] + suffix
        ids_c[i, : len(c)], ids_k[i, : len(kk)], mask[i, : len(c)] = torch.tensor(c), torch.tensor(kk), 1
    answer_pos = torch.tensor([len(prefix) + length + k - 1 for k in ks])
    texts_c = [hf.decode(r) for r in clean]
    texts_k = [hf.decode(r) for r in corrupted]
    return (
        ids_c,
        ids_k,
        mask,
        answer_pos,
        torch.tensor(right),
        torch.tensor(wrong),
        torch.zeros(n, dtype=torch.bool),
        [f"k={k}" for k in ks],
        texts_c,
        texts_k,
    )


def contrastive_pairs(task: str, tokenizer, n: int, seed: int = 0, held_out: float = 0.25) -> PairSet:
    """``n`` seeded contrastive pairs of ``task`` (``PAIR_TASKS``), tokenised with ``tokenizer`` (the
    toolkit's ``Tokenizer``, e.g. ``model.tokenizer``, or a fast Hugging Face one) under the model's
    one input convention (``analyses.heads.model_input``, the probe's: SmolLM2's prompts start with
    ``<|endoftext|>``; BOS/[CLS] as the tokenizer adds them elsewhere; ``PairSet.input`` says which);
    a seeded ``held_out`` share of them is flagged ``held_out``.

    * ``subject_verb``: "The keys near the cabinet" / "The key near the cabinet" -> " are" vs " is"
      (forms: a prepositional phrase, or an object relative clause "The keys that the man found");
      half have an attractor (``attractor``: the intervening noun has the other number); the
      corruption flips the subject's number only.
    * ``pronoun_gender``: "The king who met the queen blamed" -> " himself" vs " herself": one male and
      one female antecedent; the reflexive binds to the subject of the clause it continues; the
      corruption swaps the two people.
    * ``ioi``: Wang et al. (2022)'s forms, "Then, Mary and John went to the store. John gave a drink
      to" -> " Mary" vs " John" (ABBA and BABA), names that are single tokens; the corruption is their
      ABC one (the second "John" becomes a third name).
    * ``induction``: 12 random tokens x then x[:k] -> x[k] vs w, the token that replaces x[k] in the
      first copy in the corrupted prompt.

    Every word that is swapped is a single token (words that are not are skipped, with an error if
    too few are left), so clean and corrupted have the same length; the answers are single tokens.
    Pairs are distinct. Use ``solved`` to keep the pairs a model gets right."""
    check_task(task)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer (the number of pairs), got {n!r}")
    if not 0 <= held_out < 1:
        raise ValueError(f"held_out is the share of pairs held out, in [0, 1), got {held_out!r}")
    hf, tok, convention = _input_of(tokenizer)
    rng = np.random.default_rng(seed)
    if task == "induction":
        parts = _induction_pairs(hf, tok, int(n), rng)
    else:
        parts = _text_pairs(task, hf, tok, int(n), rng)
    flag = torch.zeros(int(n), dtype=torch.bool)
    flag[torch.as_tensor(rng.permutation(int(n))[: int(round(held_out * n))], dtype=torch.long)] = True
    clean, corrupted, mask, pos, right, wrong, attractor, template, texts_c, texts_k = parts
    return PairSet(
        clean, corrupted, right, wrong, pos, mask, held_out=flag, task=task, attractor=attractor, template=template,
        clean_texts=texts_c, corrupted_texts=texts_k, input=convention,
    )  # fmt: skip


@torch.no_grad()
def pair_logit_diff(model, pairs: PairSet, which: str = "clean", batch_size: int = 64) -> Tensor:
    """[n] logit(right) - logit(wrong) of ``model`` (a causal LM: the toolkit's or a
    TransformerBridge) on the ``clean`` or ``corrupted`` prompts, in batches."""
    if which not in ("clean", "corrupted"):
        raise ValueError(f"which must be 'clean' or 'corrupted', got {which!r}")
    if not is_lm(model):
        raise ValueError("the logit-difference metric needs a causal model with an LM head (e.g. smollm2)")
    out = []
    for batch in pairs.batches(batch_size):
        width = int(batch.attention_mask.sum(1).max())
        tokens = (batch.clean if which == "clean" else batch.corrupted)[:, :width]
        out.append(logit_diff(model(tokens, attention_mask=batch.attention_mask[:, :width]), batch).cpu())
    return torch.cat(out) if out else torch.zeros(0)


def solved(model, pairs: PairSet, batch_size: int = 64) -> Tensor:
    """[n] bool: the pairs ``model`` gets right (logit difference > 0 on the clean prompt)."""
    return pair_logit_diff(model, pairs, "clean", batch_size) > 0
