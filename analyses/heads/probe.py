"""Head roles: classify every attention head of a model, with baselines, intervals and FWER control.

>>> import models, analyses.heads as heads
>>> df = heads.probe_heads(models.load("minilm"), n=200, seed=0)
>>> df[df.label][["layer", "head", "role", "direction", "score", "baseline", "ci_low", "ci_high"]]

Roles (the exact names used in every table)
-------------------------------------------
======================  ===========  =====================================================  ============
role                    metric       what is measured (per sentence, then averaged)         baseline
======================  ===========  =====================================================  ============
``local``               mass         attention on offsets -1, 0, +1 (token level)           uniform
``previous_token``      mass         attention on the previous token (TL ``mul`` score)     uniform
``next_token``          mass         attention on the next token                            uniform
``self_token``          mass         attention on the token itself                          uniform
``attention_sink``      mass         attention on the first token ([CLS], BOS, or token 0)  uniform
``sep_eos``             mass         on trailing special tokens ([SEP], EOS), else on the   uniform
                                     sentence-final punctuation word
``punctuation``         mass         on punctuation words                                   uniform
``delimiter``           mass         on punctuation, special tokens and the first token     uniform
``broad``               entropy      row entropy / log(visible keys)                        0.9 (fixed)
``duplicate_token``     mass         on earlier copies of the same token (TL ``mul``)       uniform
``induction``           mass         on the token after an earlier copy (TL ``mul``)        uniform
``subject_verb``        accuracy     the row word's largest weight (self excluded) is the    best offset,
                                     gold partner (Clark et al., 2019)                      first word
``anaphora``            accuracy     same, pronoun <-> antecedent                           best offset,
                                                                                            first word,
                                                                                            nearest noun
``rhyme``               accuracy     same, a line's last word <-> its rhyme partner's       + nearest
                                     (sonnets; a non-rhyming control set beside it)          line end
``line_structure``      accuracy     same, a line's first word <-> the previous line's      best offset,
                                                                                            first word
======================  ===========  =====================================================  ============

Token-level masses average over the query rows (rows that are themselves in the target set are left
out for the set roles, so a token attending to itself does not count). "uniform" is the score a
head attending uniformly over the keys it may see would get on the same sentence. The word-level
relation roles are scored in both directions on bidirectional models (``verb->subject`` and
``subject->verb``, ...) and only looking back on causal models. Attention *to* a word sums over its
tokens, *from* a word averages over them. Special tokens take Clark et al.'s convention by default
(``specials="exclude"``: the largest weight among the sentence's other words; ``"include"``: they
compete as columns of their own), both reported. Relations are scored per source and subset; the
rows that carry labels are each source on its own, on the relation's ``LABEL_SUBSET`` (anaphora:
antecedent neither the subject nor the nearest noun). ``weighting=("attention", "norm")`` scores
every test again on Kobayashi et al.'s norm-weighted attention; boundary labels need both.

Statistics (see ``interp.stats``): per row a paired one-sided t-test of the per-sentence score minus
baseline against a minimum effect ``margin``; Holm-Bonferroni within each role's family of
label-carrying rows (family-wise error <= ``alpha`` per role); a 95% streaming Poisson-bootstrap
interval over sentences. ``label`` is true where the Holm-adjusted p <= alpha, the interval's lower
end clears the baseline, and (except for ``broad``) clears the same head's score in a randomly
initialised model of the same architecture (``null_score``). ``detectable_effect`` gives the power
figure, ``role_map`` the primary role of every head. docs/head-roles.md has the whole story.

Everything is reduced inside ``blocks.{l}.attn.hook_pattern`` hooks batch by batch: no cache is
kept. The analysis needs only those hook names, so it runs on the toolkit's ``models.Transformer``
and on a ``transformer_lens.TransformerBridge`` alike (see ``adapt``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from analyses.data.generated import MINIMAL_PAIR_SOURCE, random_repeated_tokens
from analyses.data.items import USER_FILE_SOURCES, Item, is_punctuation, item_location
from analyses.data.sources import load_items
from analyses.heads.roles import (
    BROAD_REFERENCE,
    CEILINGS,
    COLUMNS,
    IDLE,
    MAP_PRIMARY,
    NORM_LABEL_ROLES,
    RELATIONS,
    SET_ROLES,
    SINK_ROLES,
    SPECIALS,
    WEIGHTINGS,
)
from analyses.heads.scoring import (
    RelationPlan,
    TokenPlan,
    duplicate_detection,
    norm_weighted,
    relation_columns,
    relation_finish,
    special_columns,
    token_plan,
    token_role_scores,
    value_norms,
    word_columns,
)
from interp import stats
from interp.distributed import World, current
from interp.names import act_name, layer_of
from interp.reducers import PairedReducer, PoissonBootstrap, RowBlocks
from interp.view import ModelView, view

__all__ = [
    "Adapter",
    "adapt",
    "sink_tokenizer",
    "SINK_TOKENS",
    "probe_heads",
    "probe_items",
    "check_sentences",
    "head_summary",
    "top_head",
    "headline",
    "role_map",
    "labelled_roles",
    "detectable_effect",
    "in_stratum",
    "source_of",
    "SUBSETS",
    "LABEL_SUBSET",
    "LABEL_GATES",
    "CONTROL_SUBSET",
    "PAIR_SHARE_MIN",
    "real_text_heads",
    "noun_heuristics",
    "cluster_order",
]


# --------------------------------------------------------------------------------------------------
# Model adapter: the probe needs a word tokenizer, the pattern hooks and one forward call.


@dataclass(frozen=True)
class Adapter:
    """What the probe needs from a model: its ``ModelView`` (shape, causality, forward with hooks)
    and a word-aligning ``models.Tokenizer`` (``tokenizer.words(word_lists)`` -> ``models.Batch``)."""

    view: ModelView
    tokenizer: object  # models.Tokenizer
    sink: str = "first token"  # what position 0 of every sentence is (``sink_tokenizer``)

    name = property(lambda self: self.view.name)
    n_layers = property(lambda self: self.view.n_layers)
    n_heads = property(lambda self: self.view.n_heads)
    is_causal = property(lambda self: self.view.causal)
    n_ctx = property(lambda self: self.view.n_ctx)
    d_vocab = property(lambda self: self.view.d_vocab or len(self.tokenizer.hf))
    model = property(lambda self: self.view.model)
    device = property(lambda self: self.view.device)

    @property
    def special_ids(self) -> tuple[int, ...]:
        return tuple(sorted({int(i) for i in (getattr(self.tokenizer.hf, "all_special_ids", None) or [])}))

    @staticmethod
    def hook_name(layer: int) -> str:
        return act_name(layer, "attn.hook_pattern")

    def forward(self, batch, fwd_hooks):
        """Run the model on a ``models.Batch`` (its tensors moved to the model's device) with
        temporary hooks (no unembedding where optional)."""
        dev = self.device

        def on(t):
            return t if t is None or dev.type == "cpu" else t.to(dev)

        return self.view.run_with_hooks(
            on(batch.input_ids),
            attention_mask=on(batch.attention_mask),
            token_type_ids=on(batch.token_type_ids),
            fwd_hooks=fwd_hooks,
            return_type=None,
        )

    def output_weights(self, layer: int):
        """W_O [head, d_head, d_model] of one layer as a float tensor (our model and TransformerLens),
        for the norm lens; None where the model has none."""
        w = getattr(self.model.blocks[layer].attn, "W_O", None)
        return None if w is None else torch.as_tensor(w).detach().float().clone()


def adapt(model, tokenizer=None, sink: bool = True) -> Adapter:
    """An ``Adapter`` for a ``models.Transformer`` or a ``transformer_lens.TransformerBridge`` (or
    any HookedRootModule-like model with ``cfg.n_layers``, ``cfg.n_heads``, ``hook_dict`` holding
    ``blocks.{l}.attn.hook_pattern`` and ``run_with_hooks``). ``tokenizer`` overrides the model's own
    (a ``models.Tokenizer`` or a Hugging Face fast tokenizer). ``sink=True`` (the default) starts
    every sentence with a special token where the tokenizer adds none (``sink_tokenizer``), so that
    the attention sink is a special token that ``specials="exclude"`` leaves out of every word
    argmax; ``sink=False`` keeps the tokenizer as it is."""
    if isinstance(model, Adapter):
        return model
    from models.tokenizer import Tokenizer

    v = view(model)
    names = set(getattr(model, "hook_dict", {}) or {})
    missing = [Adapter.hook_name(l) for l in range(v.n_layers) if Adapter.hook_name(l) not in names]
    if missing or not hasattr(model, "run_with_hooks"):
        near = sorted(n for n in names if n.endswith("pattern"))[:4]
        raise ValueError(
            f"{type(model).__name__} does not expose the hooks the probe needs: {missing[:3]}"
            f"{' ...' if len(missing) > 3 else ''} "
            "(need blocks.{l}.attn.hook_pattern [batch, head, query_pos, key_pos] "
            f"for every layer and run_with_hooks){'; it has ' + ', '.join(near) if near else ''}"
        )
    tok = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tok is None:
        raise ValueError(
            "the model has no tokenizer attached; pass tokenizer= (a models.Tokenizer or a fast HF tokenizer)"
        )
    if not isinstance(tok, Tokenizer):
        tok = Tokenizer(tok)
    tok, what = sink_tokenizer(tok) if sink else (tok, _sink_of(tok))
    return Adapter(view=v, tokenizer=tok, sink=what)


# the special tokens a sentence may start with where the tokenizer adds none, in order of preference:
# a pre-training document separator (GPT-2's and SmolLM2's ``<|endoftext|>``) before the tokenizer's
# own BOS (SmolLM2's is ``<|im_start|>``, the instruct model's chat-turn marker)
SINK_TOKENS = ("<|endoftext|>",)


def _sink_of(tok) -> str:
    """What position 0 of a sentence is under ``tok``: its special token, else "first word"."""
    hf = tok.hf
    if tok.prepend_bos and tok.bos_token_id is not None:
        return hf.convert_ids_to_tokens(tok.bos_token_id)
    ids = list(hf("x")["input_ids"])
    special = set(hf.all_special_ids) - {hf.unk_token_id}
    return hf.convert_ids_to_tokens(ids[0]) if ids and ids[0] in special else "first word"


def _layer_types(adapter: Adapter) -> list[str] | None:
    """Each layer's attention type ("sliding" or "full") where the model mixes the two (Gemma 3's
    sliding-window and global layers), else None: the report compares the roles of the two kinds."""
    cfg = getattr(adapter.model, "cfg", None)
    if cfg is None or not hasattr(cfg, "layer_type"):
        return None
    types = [str(cfg.layer_type(l)) for l in range(adapter.n_layers)]
    return types if len(set(types)) > 1 else None


def sink_tokenizer(tok) -> tuple[object, str]:
    """(the tokenizer the head analyses use, what its sink position is). Every model gets an
    explicit sink position that the relation scorers leave out of the argmax, as Clark et al.
    (2019) leave out [CLS] and [SEP]: position 0, a special token. A tokenizer that starts every
    sentence with one ([CLS], ``<s>``) is kept. One that adds none (SmolLM2: no BOS, so its sink
    would be the sentence's first word, which cannot then be anyone's subject) gets a copy that
    prepends the first of ``SINK_TOKENS`` it knows, else its BOS token: ``"<|endoftext|> (prepended)"``.
    With neither, the sink stays the first word ("first word"). The model's own tokenizer, and so
    ``to_tokens``, is not changed."""
    from models.tokenizer import Tokenizer

    first = _sink_of(tok)
    if first != "first word":
        return tok, first
    known = set(tok.hf.all_special_tokens)
    choice = next((t for t in SINK_TOKENS if t in known), None) or tok.hf.bos_token
    if choice is None:
        return tok, first
    return Tokenizer(tok.hf, prepend_bos=True, bos=choice), f"{choice} (prepended)"


# --------------------------------------------------------------------------------------------------
# Data and baselines


@dataclass
class _Test:
    role: str
    direction: str
    metric: str
    kind: str  # "token", "relation", "repeat"
    relation: str | None = None
    forward: bool = True
    baseline_kind: str = "uniform"
    margin: float = 0.05
    offset: int | None = None  # best fixed offset (relation tests)
    offset_baseline: float = float("nan")
    candidate_baseline: float = float("nan")
    specials: str = "-"  # relation tests: "exclude" / "include" (see roles.COLUMNS)
    source: str = "all"  # relation tests: the items' source, or "all"
    subset: str = "all"  # relation tests: a slice of the items (SUBSETS), or "all"
    carries_label: bool = True  # False: descriptive (own p-value, outside the family, never a label)
    weighting: str = "attention"  # "attention" (the pattern) or "norm" (Kobayashi et al.'s ||a f(x)||)
    heuristics: bool = False  # the noun heuristics (nearest, first, k-th noun) enter ``baseline``
    noun_k: int = 0  # the best k-th noun heuristic's k (relation tests)
    heuristic: str = "-"  # the best noun heuristic's name, and its accuracy on the test's items
    heuristic_baseline: float = float("nan")

    @property
    def family(self) -> str:
        """The multiple-comparison family of a label-carrying test ("" for descriptive tests)."""
        if not self.carries_label:
            return ""
        return self.role if self.weighting == "attention" else f"{self.role}@{self.weighting}"


def _row_gold(item: Item, forward: bool) -> tuple[int, int]:
    return (item.query, item.target) if forward else (item.target, item.query)


# the reverse directions' control (antecedent->pronoun, subject->verb): the row of another noun of
# the sentence, the gold still the query word. A head whose every noun attends to the pronoun is
# not an antecedent->pronoun head; a reverse label must beat this control (LABEL_GATES' "control")
CONTROL_SUBSET = "other noun"


def _other_noun(item: Item) -> int:
    """The candidate noun other than the target nearest to the query (-1 where there is none)."""
    others = [c for c in item.candidates if c not in (item.target, item.query)]
    return min(others, key=lambda c: (abs(c - item.query), c)) if others else -1


def _test_row_gold(test: _Test, item: Item) -> tuple[int, int]:
    """(row word, gold word) of ``item`` under ``test``: the relation's direction, or for the
    reverse control the other noun's row and the query as the gold."""
    if test.subset == CONTROL_SUBSET:
        return _other_noun(item), item.query
    return _row_gold(item, test.forward)


def source_of(item: Item) -> str:
    """The source family of an item: "generated", "winobias", "spacy-silver", "conllu"."""
    return item.source.split(":")[0]


def _first_noun(item: Item) -> int:
    return min(set(item.candidates) | {item.target})


def _nouns_before(item: Item) -> list[int]:
    """The item's nouns (its candidates and its target) before the query word, in sentence order."""
    return sorted(c for c in set(item.candidates) | {item.target} if c < item.query)


def _kth_noun(item: Item, k: int) -> int:
    """The k-th noun (1-based) before the query word, or -1 where there are fewer."""
    nouns = _nouns_before(item)
    return nouns[k - 1] if len(nouns) >= k else -1


# the noun heuristics a relation head must beat, looking back from the query (verb, pronoun):
# the nearest preceding noun, the first noun, and the k-th noun for the best fixed k <= MAX_NOUN_K
HEURISTIC_RELATIONS = ("subject_verb", "anaphora")
MAX_NOUN_K = 4


def _noun_heuristic(item: Item, kind: str, k: int = 0) -> bool:
    """Whether noun heuristic ``kind`` ("nearest noun", "first noun", "noun k") finds the gold target."""
    if kind == "nearest noun":
        return _nearest_candidate(item) == item.target
    if kind == "first noun":
        nouns = _nouns_before(item)
        return bool(nouns) and nouns[0] == item.target
    return _kth_noun(item, k) == item.target


def noun_heuristics(items: Sequence[Item]) -> dict[str, float]:
    """The accuracy of each noun heuristic on ``items`` (looking back from the query): "nearest
    noun", "first noun" and "noun k" for k = 2 .. MAX_NOUN_K (k = 1 is the first noun)."""
    items = list(items)
    if not items:
        return {}
    out = {kind: float(np.mean([_noun_heuristic(it, kind) for it in items])) for kind in ("nearest noun", "first noun")}
    for k in range(2, MAX_NOUN_K + 1):
        out[f"noun {k}"] = float(np.mean([_noun_heuristic(it, "noun", k) for it in items]))
    return out


def _intervening(item: Item) -> bool:
    """A candidate noun between the two words of the relation (an attractor for subject-verb, a
    nearer distractor for anaphora)."""
    lo, hi = sorted((item.query, item.target))
    return any(lo < c < hi for c in item.candidates if c != item.target)


# subsets reported beside each relation (descriptive), and the one that carries the anaphora label:
# a head attending to the sentence's subject (its first noun) looks like an anaphora head whenever the
# antecedent is the subject, and one attending to the nearest noun whenever the antecedent is that,
# so the label is tested where the antecedent is neither ("antecedent=other": a distractor noun of
# the wrong gender or number stands nearer to the pronoun)
SUBSETS = {
    "subject_verb": {
        "attractor": _intervening,
        "no attractor": lambda it: not _intervening(it),
        "distance 1-2": lambda it: abs(it.query - it.target) <= 2,
        "distance 3+": lambda it: abs(it.query - it.target) >= 3,
    },
    "rhyme": {  # the previous line's end is the nearest candidate: right for couplets only
        "partner=previous line": lambda it: _nearest_candidate(it) == it.target,
        "partner=earlier line": lambda it: _nearest_candidate(it) != it.target,
    },
    "line_structure": {},
    "anaphora": {
        "antecedent=subject": lambda it: it.target == _first_noun(it),
        "antecedent=nearest": lambda it: it.target != _first_noun(it) and _nearest_candidate(it) == it.target,
        "antecedent=other": lambda it: it.target != _first_noun(it) and _nearest_candidate(it) != it.target,
    },
}
# rhyme: where the partner is not the previous line's end (ABAB), so a head attending to the nearest
# line end cannot pass; the control source (non-rhyming line ends at the same distance) never labels
LABEL_SUBSET = {
    "subject_verb": "all",
    "anaphora": "antecedent=other",
    "rhyme": "partner=earlier line",
    "line_structure": "all",
}
CONTROL_SOURCES = ("sonnets-control",)
# sources whose rows never carry a label of their own: the rhyme control, and the minimal pairs,
# which are scored per pair (a pair counts as right only where the head is right on both of its
# sentences: the argmax moved with the cue) and enter the labels as a gate (LABEL_GATES)
NON_LABEL_SOURCES = (*CONTROL_SOURCES, MINIMAL_PAIR_SOURCE)


def in_stratum(test: _Test, item: Item) -> bool:
    """Whether ``item`` counts for relation test ``test`` (its relation, source and subset)."""
    if item.relation != test.relation or item.query < 0 or item.target < 0:
        return False
    if test.source != "all" and source_of(item) != test.source:
        return False
    if test.subset == CONTROL_SUBSET:
        return _other_noun(item) >= 0
    return test.subset == "all" or SUBSETS[test.relation][test.subset](item)


def _relation_tests(
    items: Sequence[Item], causal: bool, margin: float, specials: Sequence[str] = SPECIALS
) -> list[_Test]:
    """The word-relation tests. Per relation and direction: the label-carrying tests (the first
    ``specials`` convention, one per source, on the relation's ``LABEL_SUBSET``), and descriptive
    ones: every source pooled, each source and each subset on its own, and the other conventions
    for the label-carrying strata."""
    tests = []
    for relation, (fwd_name, rev_name) in RELATIONS.items():
        rel = [it for it in items if it.relation == relation and it.query >= 0 and it.target >= 0]
        sources = sorted({source_of(it) for it in rel})
        label_subset = LABEL_SUBSET[relation]
        strata = [("all", "all", False)] + [(s, label_subset, s not in NON_LABEL_SOURCES) for s in sources]
        strata += [(s, "all", False) for s in sources if label_subset != "all" or s == MINIMAL_PAIR_SOURCE]
        strata += [("all", sub, False) for sub in SUBSETS[relation]]
        # one test per stratum (the minimal pairs' "all" is the label subset of subject-verb too)
        strata = [st for i, st in enumerate(strata) if st[:2] not in {x[:2] for x in strata[:i]}]
        controls = []  # the reverse control, beside every label-carrying source and pooled
        if relation in HEURISTIC_RELATIONS:
            controls = [("all", CONTROL_SUBSET, False)] + [(s, CONTROL_SUBSET, False) for s, _, lab in strata if lab]
        for forward, name in ((True, fwd_name), (False, rev_name)):
            if causal and not forward:
                continue  # a causal row cannot see a later word; the forward direction looks back
            for source, subset, label_stratum in strata + ([] if forward else controls):
                for k, convention in enumerate(specials):
                    if k > 0 and not label_stratum and (source, subset) != ("all", "all"):
                        continue
                    probe = _Test(
                        role=relation,
                        direction=name,
                        metric="accuracy",
                        kind="relation",
                        relation=relation,
                        forward=forward,
                        margin=margin,
                        specials=convention,
                        source=source,
                        subset=subset,
                        carries_label=label_stratum and k == 0,
                        # subject-verb on all items keeps the positional baselines: there the first
                        # noun is usually the subject, so its label is gated on the subsets where
                        # the heuristics fail instead (LABEL_GATES)
                        heuristics=forward
                        and relation in HEURISTIC_RELATIONS
                        and not (relation == "subject_verb" and subset == "all" and source != MINIMAL_PAIR_SOURCE),
                    )
                    members = [it for it in rel if in_stratum(probe, it)]
                    if members or (source, subset) == ("all", "all"):  # the pooled row is always there
                        tests.append(_with_baseline(probe, members, causal))
    return tests


def _with_baseline(t: _Test, rel: Sequence[Item], causal: bool) -> _Test:
    """Set the test's baseline: the best of a fixed word offset, the first word, (anaphora and
    rhyme, looking back) the nearest preceding candidate and, where ``t.heuristics``, the noun
    heuristics (``noun_heuristics``: nearest, first and k-th noun), over the test's own items. The
    best noun heuristic is recorded either way (``heuristic``, ``heuristic_baseline``)."""
    pairs = [_test_row_gold(t, it) for it in rel]
    if causal:
        pairs = [(r, g) for r, g in pairs if g < r]
    offsets = pd.Series([g - r for r, g in pairs], dtype="int64")
    best = int(offsets.value_counts().idxmax()) if len(offsets) else -1
    off_acc = float((offsets == best).mean()) if len(offsets) else float("nan")
    t.baseline_kind, t.offset, t.offset_baseline = f"offset {best:+d}", best, off_acc
    best_acc = off_acc
    # a head that always attends to the first word (the attention sink of models without a
    # BOS token) is right whenever the gold word is word 0: a fixed-position baseline
    first = float(np.mean([g == 0 for _, g in pairs])) if pairs else float("nan")
    if pairs and first > best_acc:
        t.baseline_kind, best_acc = "first word", first
    if t.relation in ("anaphora", "rhyme") and t.forward:
        cand = [float(_nearest_candidate(it) == it.target) for it in rel if not causal or it.target < it.query]
        t.candidate_baseline = float(np.mean(cand)) if cand else float("nan")
        if cand and t.candidate_baseline > best_acc:
            t.baseline_kind, best_acc = "nearest candidate", t.candidate_baseline
    if t.relation in HEURISTIC_RELATIONS and t.forward:
        heur = noun_heuristics([it for it in rel if not causal or it.target < it.query])
        if heur:
            kind = max(heur, key=lambda name: (heur[name], name == "nearest noun"))  # ties: the nearest noun
            t.heuristic, t.heuristic_baseline = kind, heur[kind]
            t.noun_k = int(kind.split()[1]) if kind.startswith("noun ") else 0
            if t.heuristics and heur[kind] > best_acc:
                t.baseline_kind, best_acc = kind, heur[kind]
    return t


def _nearest_candidate(item: Item) -> int:
    """The nearest noun before the query among the item's candidates and its target."""
    before = [c for c in set(item.candidates) | {item.target} if c < item.query]
    return max(before) if before else -1


def _item_baseline(test: _Test, item: Item) -> float:
    r, g = _test_row_gold(test, item)
    if test.baseline_kind in ("nearest candidate", "nearest noun"):
        return float(_nearest_candidate(item) == item.target)
    if test.baseline_kind == "first noun" or test.baseline_kind.startswith("noun "):
        return float(_noun_heuristic(item, test.baseline_kind, test.noun_k))
    if test.baseline_kind == "first word":
        return float(g == 0)
    return float(g - r == test.offset)


# --------------------------------------------------------------------------------------------------
# The probe


@dataclass
class _Batch:
    kind: str  # "sentences" or "repeat"
    batch: object  # models.Batch-like (input_ids, attention_mask, token_type_ids, token_to_word)
    token: TokenPlan
    relation: RelationPlan | None = None  # the stacked relation tests
    baselines: dict = field(default_factory=dict)  # test index -> [batch]
    rel_index: list = field(default_factory=list)  # test indices of the stacked relation tests
    units: range = range(0)  # the run's unit indices of the batch's rows (shards)
    clusters: Sequence[int] = ()  # the rows' cluster numbers (bootstrap seeds, the clustered test)


class _RepeatBatch:
    def __init__(self, ids: Tensor):
        self.input_ids = ids
        self.attention_mask = torch.ones_like(ids)
        self.token_type_ids = torch.zeros_like(ids)
        self.token_to_word = [[-1] * ids.shape[1] for _ in range(ids.shape[0])]


def check_sentences(model, items: Sequence[Item], tokenizer=None, chunk: int = 256) -> None:
    """Refuse, before any forward pass, a sentence longer than the model's context or one in which a
    word gets no token: ValueError naming where the sentence came from (FILE:LINE for a user's
    CoNLL-U or text file, see ``analyses.data.item_location``)."""
    adapter = adapt(model, tokenizer)
    n_ctx = adapter.n_ctx

    def too_long(i: int, n_tokens: int, what: str) -> ValueError:
        it = items[i]
        return ValueError(
            f"{item_location(it, i)} has {n_tokens} {what}, more than the context of {adapter.name!r} "
            f"(n_ctx={n_ctx}): {' '.join(it.words)[:120]!r}; drop or shorten it"
        )

    for i, it in enumerate(items):  # every word takes at least one token: no need to tokenize these
        if len(it.words) > n_ctx:
            raise too_long(i, len(it.words), "words")
    for start in range(0, len(items), chunk):
        part = items[start : start + chunk]
        batch = adapter.tokenizer.words([list(it.words) for it in part])
        for k, it in enumerate(part):
            if batch.lengths[k] > n_ctx:
                raise too_long(start + k, int(batch.lengths[k]), "tokens")
            got = {w for w in batch.token_to_word[k] if w >= 0}
            if len(got) != len(it.words):
                lost = [it.words[w] for w in range(len(it.words)) if w not in got]
                raise ValueError(f"words {lost} of {item_location(it, start + k)} got no token: {' '.join(it.words)!r}")


def _token_sets(batch, chunk: Sequence[Item]) -> Tensor:
    """[batch, pos, len(SET_ROLES)] bool: the attention_sink (position 0: the sink, see
    ``sink_tokenizer``), sep_eos, punctuation and delimiter keys (punctuation and special tokens
    other than the sink: a delimiter head attends to delimiters, not to the sink)."""
    mask = batch.attention_mask.bool()
    sets = torch.zeros(len(chunk), batch.input_ids.shape[1], len(SET_ROLES), dtype=torch.bool)
    for i, it in enumerate(chunk):
        align = batch.token_to_word[i]
        n = int(mask[i].sum())
        special = [pos for pos in range(n) if align[pos] < 0]
        punct = [pos for pos in range(n) if align[pos] >= 0 and is_punctuation(it.words[align[pos]])]
        trailing = []
        pos = n - 1
        while pos > 0 and align[pos] < 0:
            trailing.append(pos)
            pos -= 1
        if not trailing and is_punctuation(it.words[-1]):
            trailing = [pos for pos in range(n) if align[pos] == len(it.words) - 1]
        sets[i, 0, 0] = True  # attention_sink: the first token
        for p_ in trailing:
            sets[i, p_, 1] = True
        for p_ in punct:
            sets[i, p_, 2] = True
        for p_ in (set(punct) | set(special)) - {0}:  # not the sink (token_plan leaves it out too)
            sets[i, p_, 3] = True
    return sets


def _relation_plan(batch, chunk: Sequence[Item], tests: list, causal: bool) -> tuple[RelationPlan, dict, list]:
    """(the stacked plan of the relation tests, test index -> per-sentence baseline, their test indices)."""
    mask = batch.attention_mask.bool()
    t = batch.input_ids.shape[1]
    n_words = [len(it.words) for it in chunk]
    cols, exists = word_columns(batch.token_to_word, mask, n_words)
    rel = [k for k, test in enumerate(tests) if test.kind == "relation"]
    rows = torch.zeros(len(chunk), len(rel), t)
    gold = torch.zeros(len(chunk), len(rel), dtype=torch.long)
    others = exists[:, None].repeat(1, len(rel), 1)
    valid = torch.zeros(len(chunk), len(rel), dtype=torch.bool)
    baselines = {}
    for j, k in enumerate(rel):
        test = tests[k]
        base = torch.zeros(len(chunk))
        for i, it in enumerate(chunk):
            if not in_stratum(test, it):
                continue
            r, g = _test_row_gold(test, it)
            if causal and g > r:
                continue
            toks = [pos for pos, w in enumerate(batch.token_to_word[i]) if w == r and mask[i, pos]]
            rows[i, j, toks] = 1.0 / len(toks)
            gold[i, j] = g
            others[i, j, r] = others[i, j, g] = False
            valid[i, j] = True
            base[i] = _item_baseline(test, it)
        baselines[k] = base
    plan = RelationPlan(
        row_weights=rows,
        columns=cols,
        gold=gold,
        others=others,
        valid=valid,
        special_cols=special_columns(exists, n_words),
        exclude_specials=torch.tensor([tests[k].specials == "exclude" for k in rel], dtype=torch.bool),
    )
    return plan, baselines, rel


def cluster_order(items: Sequence[Item]) -> tuple[list[Item], list[int]]:
    """The items in probe order and each one's cluster number: clusters (``Item.cluster`` within a
    source; an item without one is alone) kept together, ordered by their longest sentence (batches
    of similar lengths pad little), a cluster's number being the position of its first item. Items
    without clusters come out exactly as ``sorted(items, key=len(words))`` and numbered 0, 1, ..."""
    groups: dict = {}
    for i, it in enumerate(items):
        groups.setdefault((it.source, it.cluster) if it.cluster else ("", i), []).append(it)
    ordered = sorted(groups.values(), key=lambda g: max(len(it.words) for it in g))
    out, numbers = [], []
    for g in ordered:
        first = len(out)
        for it in sorted(g, key=lambda it: len(it.words)):
            out.append(it)
            numbers.append(first)
    return out, numbers


def _batch_spans(clusters: Sequence[int], batch_size: int) -> list[tuple[int, int]]:
    """(start, stop) of each sentence batch: ``batch_size`` items, cut only between clusters (a
    cluster larger than a batch is a batch of its own), so each cluster is reduced whole."""
    spans, start = [], 0
    n = len(clusters)
    while start < n:
        stop = min(start + batch_size, n)
        while 0 < stop < n and clusters[stop] == clusters[stop - 1] and stop > start:
            stop -= 1  # back to the start of the cluster the cut would split
        if stop == start:  # one cluster longer than a batch: take it whole
            stop = start + 1
            while stop < n and clusters[stop] == clusters[start]:
                stop += 1
        spans.append((start, stop))
        start = stop
    return spans


def _sentence_batches(
    adapter: Adapter,
    items: Sequence[Item],
    tests: list,
    batch_size: int,
    world: World | None = None,
    clusters: Sequence[int] | None = None,
):
    """The plans of the sentence batches this worker owns (batch k: rank k % N; all without ``world``);
    units 0 .. len(items) - 1 in this order, ``clusters`` their cluster numbers (default: each its
    own). The sentences were checked (``check_sentences``)."""
    clusters = list(range(len(items))) if clusters is None else list(clusters)
    for k, (start, stop) in enumerate(_batch_spans(clusters, batch_size)):
        if world is not None and not world.owns(k):
            continue
        chunk = items[start:stop]
        batch = adapter.tokenizer.words([list(it.words) for it in chunk])
        mask = batch.attention_mask.bool()
        plan = _Batch(
            kind="sentences",
            batch=batch,
            token=token_plan(mask, adapter.is_causal, _token_sets(batch, chunk)),
            units=range(start, stop),
            clusters=clusters[start:stop],
        )
        plan.relation, plan.baselines, plan.rel_index = _relation_plan(batch, chunk, tests, adapter.is_causal)
        yield plan


def _repeat_batches(
    adapter: Adapter,
    n: int,
    length: int,
    seed: int,
    batch_size: int,
    world: World | None = None,
    first_batch: int = 0,
    first_unit: int = 0,
):
    """The random repeated-token batches this worker owns; they follow the sentence batches, so
    their batch and unit numbers start at ``first_batch`` and ``first_unit``."""
    if n <= 0:
        return
    length = min(length, adapter.n_ctx // 2)
    n_ordinary = adapter.d_vocab - len(adapter.special_ids)
    ids = random_repeated_tokens(n, min(length, n_ordinary), adapter.d_vocab, seed, avoid=adapter.special_ids)
    for k, start in enumerate(range(0, n, batch_size)):
        if world is not None and not world.owns(first_batch + k):
            continue
        chunk = ids[start : start + batch_size]
        mask = torch.ones_like(chunk, dtype=torch.bool)
        det = duplicate_detection(chunk)
        sets = torch.zeros(*chunk.shape, len(SET_ROLES), dtype=torch.bool)
        yield _Batch(
            kind="repeat",
            batch=_RepeatBatch(chunk),
            token=token_plan(mask, adapter.is_causal, sets, detect=det),
            units=range(first_unit + start, first_unit + start + chunk.shape[0]),
            clusters=range(first_unit + start, first_unit + start + chunk.shape[0]),
        )


@dataclass
class _Pass:
    """One pass of the probe over a model: the sentences (in batch order), then ``n_repeat`` random
    repeated-token sequences seeded by ``seed``. Units (bootstrap seeds, shards) number the
    sentences first, then the sequences; batch k belongs to worker k % N."""

    adapter: Adapter
    sentences: Sequence[Item]
    n_repeat: int
    repeat_length: int
    seed: int
    batch_size: int
    clusters: Sequence[int] | None = None  # the sentences' cluster numbers (``cluster_order``)
    query_block: int | None = None  # query rows per pattern block (``models.blockwise``); None: whole

    @property
    def n_units(self) -> int:
        return len(self.sentences) + max(self.n_repeat, 0)

    def batches(self, tests: list, world: World | None):
        clusters = self.clusters if self.clusters is not None else list(range(len(self.sentences)))
        n_sentence_batches = len(_batch_spans(clusters, self.batch_size))
        yield from _sentence_batches(self.adapter, self.sentences, tests, self.batch_size, world, clusters)
        yield from _repeat_batches(
            self.adapter,
            self.n_repeat,
            self.repeat_length,
            self.seed,
            self.batch_size,
            world,
            n_sentence_batches,
            len(self.sentences),
        )


class _LayerScores:
    """The hooks of one probe pass: each layer's pattern (and, for the norm lens, its value vectors)
    is reduced to per-sentence scores as soon as that layer has delivered all of them, whatever order
    the hooks fire in; nothing is kept across layers. ``begin`` sets up a batch."""

    def __init__(self, adapter: Adapter, tests: list):
        self.tests = tests
        self.weightings = sorted({t.weighting for t in tests})
        ws = self.weightings
        self.token_idx = {w: [k for k, t in enumerate(tests) if t.kind == "token" and t.weighting == w] for w in ws}
        self.repeat_idx = {w: [k for k, t in enumerate(tests) if t.kind == "repeat" and t.weighting == w] for w in ws}
        self.rel_tests = [k for k, t in enumerate(tests) if t.kind == "relation"]  # the plan's stacking order
        self.rel_by_weighting = {w: [j for j, k in enumerate(self.rel_tests) if tests[k].weighting == w] for w in ws}
        L = adapter.n_layers
        self.w_o = {l: _output_weights(adapter, l) for l in range(L)} if "norm" in ws else {}
        self.needs = ("pattern", "v") if "norm" in ws else ("pattern",)
        self.hooks = [(adapter.hook_name(l), self._capture("pattern")) for l in range(L)]
        if "norm" in ws:  # the value vectors of each layer, for a_ij ||v_j W_O||
            self.hooks += [(act_name(l, "attn.hook_v"), self._capture("v")) for l in range(L)]
        self.adapter = adapter
        self.pending: dict[int, dict] = {}
        self.blocks = RowBlocks()  # per-layer sums over query blocks (models.blockwise)

    def begin(self, st: _Batch, scores: Tensor, mass: Tensor, special_mass: Tensor) -> None:
        self.st, self.scores, self.mass, self.smass = _plan_to(st, self.adapter), scores, mass, special_mass
        self.pending = {}
        self.blocks.clear()
        self.rel_plans = {}
        if st.kind == "sentences" and self.rel_tests:
            plan = _to(st.relation, self.adapter.device)
            self.rel_plans = {
                w: ([self.rel_tests[j] for j in cols], plan.take(cols))
                for w, cols in self.rel_by_weighting.items()
                if cols
            }

    def _capture(self, what: str):
        def hook(x, hook):
            layer = layer_of(hook.name)
            got = self.pending.setdefault(layer, {})
            rows = getattr(hook, "query_rows", None) if what == "pattern" else None
            if rows is not None:  # one query block (models.blockwise): reduce it now, add it up per layer
                if "v" in self.needs and "v" not in got:
                    raise RuntimeError(f"layer {layer}: pattern blocks arrived before the layer's values (hook_v)")
                totals = self.blocks.add(layer, rows, self._partial(layer, x.detach(), got.get("v"), rows.rows))
                if totals is not None:
                    del self.pending[layer]
                    self._write(layer, totals)
                return None
            got[what] = x.detach()
            if all(n in got for n in self.needs):
                got = self.pending.pop(layer)
                self._write(layer, self._partial(layer, got["pattern"], got.get("v"), None))
            return None

        return hook

    def _partial(self, layer: int, pattern: Tensor, v: Tensor | None, rows: slice | None) -> dict:
        """What each score sums over the query rows of ``pattern`` (all of them, or the block
        ``rows``): the token roles' scores and the relation tests' columns, per weighting."""
        st, tests = self.st, self.tests
        out = {}
        for w in self.weightings:
            p = pattern
            if w == "norm":  # what each key moves: a_ij ||v_j W_O||, renormalised per row
                p = norm_weighted(p, value_norms(v, self.w_o[layer].to(p.device)))
            idx = self.token_idx[w] if st.kind == "sentences" else self.repeat_idx[w]
            res = token_role_scores(p, st.token, [tests[k].role for k in idx], rows)
            out.update({f"{w}|{name}": value for name, value in res.items()})
            if st.kind == "sentences" and self.rel_by_weighting[w]:
                out[f"{w}|relations"] = relation_columns(p, self.rel_plans[w][1], rows)
        return out

    def _write(self, layer: int, totals: dict) -> None:
        """One layer's per-sentence scores into the batch's tables, from ``_partial``'s totals."""
        st, tests = self.st, self.tests
        for w in self.weightings:
            idx = self.token_idx[w] if st.kind == "sentences" else self.repeat_idx[w]
            for k in idx:  # mass: the weight itself where the score is renormalised (delimiter)
                role = tests[k].role
                self.scores[:, k, layer] = totals[f"{w}|{role}"].cpu()
                self.mass[:, k, layer] = totals.get(f"{w}|{role}:absolute", totals[f"{w}|{role}"]).cpu()
            if st.kind == "sentences" and self.rel_by_weighting[w]:
                ks, plan = self.rel_plans[w]  # this weighting's tests only: each scored once
                acc, gm, sm = relation_finish(totals[f"{w}|relations"], plan, special_mass=True)
                self.scores[:, ks, layer], self.mass[:, ks, layer] = acc.cpu(), gm.cpu()
                self.smass[:, ks, layer] = sm.cpu()

    def end(self) -> None:
        if self.pending or self.blocks.pending:
            lost = sorted(set(self.pending) | set(self.blocks.pending))
            raise RuntimeError(f"layers {lost} delivered only part of {self.needs} to the probe")


def _batch_baselines(st: _Batch, tests: list) -> tuple[Tensor, Tensor]:
    """(baseline, valid) [batch, tests, 1, 1] of one batch."""
    b = st.batch.input_ids.shape[0]
    base = torch.zeros(b, len(tests), 1, 1)
    valid = torch.zeros(b, len(tests), 1, 1, dtype=torch.bool)
    for k, t in enumerate(tests):
        if t.kind == "relation" and st.kind == "sentences":
            base[:, k, 0, 0] = st.baselines[k]
            valid[:, k, 0, 0] = st.relation.valid[:, st.rel_index.index(k)]
        elif (t.kind == "token" and st.kind == "sentences") or (t.kind == "repeat" and st.kind == "repeat"):
            base[:, k, 0, 0] = st.token.uniform[t.role]
            valid[:, k, 0, 0] = st.token.set_valid[:, SET_ROLES.index(t.role)] if t.role in SET_ROLES else True
    return base, valid


def _run(
    pass_: _Pass, tests: list, n_boot: int, seed: int, progress: bool, desc: str, world: World | None = None
) -> tuple:
    """Reduce this worker's batches, merge over the workers; returns (summary, shards): shards[r]
    lists the (first, stop) unit spans worker r reduced (checked: disjoint, covering 0 .. n_units)."""
    from tqdm.auto import tqdm

    world = world or World()
    adapter, n_units = pass_.adapter, pass_.n_units
    L, H = adapter.n_layers, adapter.n_heads
    reducer = PairedReducer((len(tests), L, H), n_boot=n_boot, extras=("mass", "special_mass"))
    clustered = stats.ClusterSums((len(tests), L, H))  # the test over clusters
    boot = PoissonBootstrap(n_boot, seed)
    spans = []
    layers = _LayerScores(adapter, tests)
    share = f" (worker 0 of {world.size})" if world.size > 1 else ""
    bar = tqdm(total=n_units, desc=desc + share, disable=not (progress and world.is_main), leave=False)
    try:
        for st in pass_.batches(tests, world):
            b = st.batch.input_ids.shape[0]
            base, valid = _batch_baselines(st, tests)
            scores, mass = torch.zeros(b, len(tests), L, H), torch.zeros(b, len(tests), L, H)
            smass = torch.full((b, len(tests), L, H), float("nan"))
            layers.begin(st, scores, mass, smass)
            with torch.inference_mode(), _query_blocks(adapter, pass_.query_block):
                adapter.forward(st.batch, layers.hooks)
            layers.end()
            if st.kind == "sentences":
                _score_pairs(tests, st.clusters, scores, base, valid)
            # one update per batch: running sums and bootstrap replicates, O(tests x layers x heads)
            # bootstrap weights seeded per unit: the same whichever worker and batch the unit is in
            # cluster bootstrap: one Poisson weight per cluster, shared by its units
            weights = boot.weights_for(st.clusters)
            reducer.update(slice(None), scores, base, valid, weights, extra={"mass": mass, "special_mass": smass})
            clustered.update((scores - base).numpy(), valid.numpy(), np.asarray(st.clusters))
            spans.append((st.units.start, st.units.stop))
            bar.update(b * world.size)  # rank 0 sees its own share; the others advance alike
    finally:
        bar.close()
    reducer.merge(world)
    if world.size > 1:
        sums = [torch.from_numpy(a) for a in clustered.arrays()]
        world.sum_(sums, add=stats.ClusterSums.add_parts)
        for a, t in zip(clustered.arrays(), sums):
            a[...] = t.numpy()
    shards = world.gather(spans)
    covered = sorted(u for spans_r in shards for a, z in spans_r for u in range(a, z))
    if covered != list(range(n_units)):
        raise RuntimeError(f"{desc}: the workers' shards do not cover units 0..{n_units - 1} exactly once")
    summ = reducer.summary()
    summ.extra["clustered"] = clustered
    return summ, shards


def _query_blocks(adapter: Adapter, rows: int | None):
    """The forward's patterns in blocks of ``rows`` query rows (``models.blockwise.pattern_blocks``),
    or whole (None)."""
    if rows is None:
        return contextlib.nullcontext()
    from models.blockwise import pattern_blocks

    return pattern_blocks(adapter.model, rows)


def _score_pairs(tests: list, clusters: Sequence[int], scores: Tensor, base: Tensor, valid: Tensor) -> None:
    """In place, for the minimal-pair tests: each sentence of a pair gets the pair's score, the
    minimum over its two sentences (1: the head is right on both: its argmax moved with the cue),
    and the baseline's likewise; a pair with one sentence out of the stratum counts for neither.
    A pair is one cluster, so both of its sentences are in this batch."""
    ks = [k for k, t in enumerate(tests) if t.kind == "relation" and t.source == MINIMAL_PAIR_SOURCE]
    if not ks:
        return
    c = torch.as_tensor(list(clusters))
    for k in ks:
        v = valid[:, k, 0, 0]
        for cluster in torch.unique(c[v]).tolist():
            rows = torch.nonzero((c == cluster) & v).flatten()
            if len(rows) != 2:
                valid[(c == cluster), k] = False
                continue
            scores[rows, k] = scores[rows, k].amin(0, keepdim=True)
            base[rows, k] = base[rows, k].amin(0, keepdim=True)


def _output_weights(adapter: Adapter, layer: int) -> Tensor:
    """W_O of one layer for norm weighting; an error naming the way out where there is none."""
    w = adapter.output_weights(layer)
    if w is None:
        raise ValueError(
            f"{adapter.name}: blocks.{layer}.attn has no W_O, so norm weighting cannot be computed; "
            "use weighting=('attention',)"
        )
    return w


def _to(plan, device):
    if device.type == "cpu":
        return plan
    return type(plan)(**{k: (v.to(device) if isinstance(v, Tensor) else v) for k, v in plan.__dict__.items()})


def _plan_to(st: _Batch, adapter: Adapter) -> _Batch:
    dev = adapter.device
    if dev.type == "cpu":
        return st
    tp = st.token
    moved = {k: (v.to(dev) if isinstance(v, Tensor) else v) for k, v in tp.__dict__.items()}
    if tp.detect:
        moved["detect"] = {k: v.to(dev) for k, v in tp.detect.items()}
    return _Batch(kind=st.kind, batch=st.batch, token=TokenPlan(**moved), relation=st.relation, baselines=st.baselines)


def _check_options(items: list, alpha: float, specials: tuple, weighting: tuple) -> None:
    if not items:
        raise ValueError("empty dataset: no items to probe (need sentences with word-level gold)")
    for i, it in enumerate(items):
        if not isinstance(it, Item):
            raise TypeError(f"item {i} is a {type(it).__name__}, not an analyses.data.Item")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if not specials or any(s not in SPECIALS for s in specials) or len(set(specials)) != len(specials):
        raise ValueError(
            f"specials must be distinct values among {SPECIALS} (the first carries the labels), got {specials}"
        )
    if not weighting or weighting[0] != "attention" or any(w not in WEIGHTINGS for w in weighting):
        raise ValueError(f"weighting must start with 'attention' and take values among {WEIGHTINGS}, got {weighting}")


def _tests(
    items: list, causal: bool, n_repeat: int, margin: float, mass_margin: float, specials: tuple, weighting: tuple
) -> list[_Test]:
    """Every test of a run, in table order: token roles, broad, word relations, repeats; then the
    same again under the norm weighting if asked."""
    tests = [
        _Test(role=r, direction="all", metric="mass", kind="token", margin=mass_margin)
        for r in ("local", "previous_token", "next_token", "self_token", *SET_ROLES)
    ]
    tests.append(
        _Test(role="broad", direction="all", metric="entropy", kind="token", baseline_kind=BROAD_REFERENCE, margin=0.0)
    )
    tests += _relation_tests(items, causal, margin, specials)
    if n_repeat > 0:
        tests += [
            _Test(role=r, direction="all", metric="mass", kind="repeat", margin=mass_margin)
            for r in ("duplicate_token", "induction")
        ]
    if "norm" in weighting:
        tests += [
            dataclasses.replace(t, weighting="norm", carries_label=t.carries_label and t.role in NORM_LABEL_ROLES)
            for t in tests
        ]
    return tests


def _null_pass(
    adapter: Adapter, items: list, null_n: int | None, n_repeat: int, repeat_length: int, seed: int, batch_size: int
) -> _Pass | None:
    """The pass over a randomly initialised model of the same architecture (None: no such model)."""
    null_net = _null_network(adapter, seed)
    if null_net is None:
        return None
    # the null is a reference score per head, not a test: an evenly spread subset suffices
    keep = (
        items if not null_n or null_n >= len(items) else [items[int(i)] for i in np.linspace(0, len(items) - 1, null_n)]
    )
    null_repeat = n_repeat if not null_n else min(n_repeat, max(10, null_n // 3))
    return _Pass(adapt(null_net, adapter.tokenizer), keep, null_repeat, repeat_length, seed + 1, batch_size)


def probe_items(
    model,
    items: Sequence[Item],
    *,
    n_repeat: int = 100,
    repeat_length: int = 20,
    seed: int = 0,
    null_model: bool = True,
    null_n: int | None = 150,
    n_boot: int = 200,
    alpha: float = 0.05,
    margin: float = 0.05,
    mass_margin: float = 0.1,
    batch_size: int = 32,
    tokenizer=None,
    progress: bool = False,
    specials: Sequence[str] = SPECIALS,
    weighting: Sequence[str] = ("attention",),
    world: World | None = None,
    query_block: int | None = None,
) -> pd.DataFrame:
    """Classify every head on the given items (plus ``n_repeat`` random repeated token sequences for
    the duplicate / induction roles). Returns one row per (layer, head, role, direction); columns
    ``COLUMNS``. ``df.attrs`` holds what was run on what data. ``null_n``: sentences (evenly
    spread over the items) for the randomly initialised null model; None: all.

    ``margin``: minimum accuracy gain over the best baseline for ``subject_verb``/``anaphora``
    (0.05, five points); ``mass_margin``: minimum attention mass above a uniform head for the mass
    roles (0.1: a head that puts 10 points more of its attention there than uniform attention
    would). The tests are against these margins, so a label means a sizeable effect, not merely a
    detectable one. ``alpha``: family-wise error rate (Holm) within each role's family.
    ``specials``: the conventions for special tokens in the word-relation argmax; the first
    ("exclude", Clark et al. 2019, by default) carries the labels, the others are descriptive.
    ``weighting``: "attention" (always, first: it carries the labels) and optionally "norm"
    (Kobayashi et al. 2020: every test again on a_ij ||v_j W_O|| renormalised per row; a delimiter
    label then needs the norm row to pass too, and the other norm rows are descriptive).
    Every sentence is checked (``check_sentences``: it fits the context, every word keeps a token)
    before the first forward pass.

    ``world`` (``interp.distributed``; default: the process group this process is in, else one
    process): every worker calls this with the same arguments, reduces the batches it owns (batch k:
    worker k % N) and the reducers are merged, so every worker returns the table one process would
    (counts bitwise, means to 1e-12, in practice bitwise: ``interp.reducers``). ``df.attrs["shards"]``
    lists the unit spans each worker reduced.

    ``query_block`` (the toolkit's own models): reduce each layer's pattern in blocks of that many
    query rows (``models.blockwise.pattern_blocks``), so a forward never holds a whole
    [query_pos, key_pos] pattern: what bounds memory at long context. The scores are sums over
    query rows added up block by block (equal to the unblocked ones up to float32 summation order).
    None (default): whole patterns."""
    adapter = adapt(model, tokenizer)
    items = list(items)
    specials, weighting = tuple(specials), tuple(weighting)
    _check_options(items, alpha, specials, weighting)
    check_sentences(adapter, items)
    tests = _tests(items, adapter.is_causal, n_repeat, margin, mass_margin, specials, weighting)
    # batches of similar lengths pad little (the statistics do not depend on the order of sentences);
    # with several workers, batch k goes to worker k % N: the batches themselves do not change
    ordered, clusters = cluster_order(items)
    world = world if world is not None else current()
    main = _Pass(adapter, ordered, n_repeat, repeat_length, seed + 1, batch_size, clusters, query_block)
    summ, shards = _run(main, tests, n_boot, seed, progress, f"probe {adapter.name}", world)
    null = None
    null_pass = _null_pass(adapter, items, null_n, n_repeat, repeat_length, seed, batch_size) if null_model else None
    if null_pass is not None:
        null_pass.query_block = query_block
        null, _ = _run(null_pass, tests, 0, seed, progress, "null model", world)
    df = _table(adapter, tests, summ, null, alpha)
    df.attrs.update(
        model=adapter.name,
        causal=adapter.is_causal,
        n_layers=adapter.n_layers,
        n_heads=adapter.n_heads,
        n_items=len(items),
        sources=pd.Series([it.source.split(":")[0] for it in items]).value_counts().to_dict(),
        relations=pd.Series([it.relation for it in items]).value_counts().to_dict(),
        user_files=_user_files(items),
        n_repeat=n_repeat,
        repeat_length=min(repeat_length, adapter.n_ctx // 2),
        seed=seed,
        n_boot=n_boot,
        alpha=alpha,
        margin=margin,
        mass_margin=mass_margin,
        null_model=null is not None,
        correction="holm per role",
        sink=adapter.sink,
        layer_types=_layer_types(adapter),
        test="paired one-sided t over clusters (Liang-Zeger standard error, clusters - 1 df)",
        interval="95% cluster Poisson bootstrap; accuracy rows widened to the Wilson interval at the clusters",
        n_clusters=len(set(clusters)),
        real_text=sorted({source_of(it) for it in items} - set(SYNTHETIC_SOURCES) - {"xsum", "sonnets"}),
        specials=list(specials),
        weighting=list(weighting),
        workers=world.size,
        shards=[[tuple(span) for span in spans] for spans in shards],
    )
    return df


def _user_files(items: Sequence[Item]) -> dict[str, dict[str, int]]:
    """Per file of the user's (CoNLL-U, text): its path, the sentences and the items drawn from it."""
    out: dict[str, dict] = {}
    for it in items:
        kind, _, path = it.source.partition(":")
        if kind in USER_FILE_SOURCES and path:
            f = out.setdefault(path, {"kind": kind, "sentences": set(), "items": 0})
            f["sentences"].add(it.info.get("sentence_line", it.words))  # two equal sentences count twice
            f["items"] += 1
    return {p: {"kind": f["kind"], "sentences": len(f["sentences"]), "items": f["items"]} for p, f in out.items()}


def _null_network(adapter: Adapter, seed: int):
    """A randomly initialised model of the same architecture, or None (bridges: not built)."""
    import models

    m = adapter.model
    if not isinstance(m, models.Transformer):
        return None
    null = models.Transformer(m.cfg, tokenizer=m.tokenizer, seed=seed + 12345).eval()
    return null.to(adapter.device)


def _table(adapter: Adapter, tests: list, summ, null, alpha: float) -> pd.DataFrame:
    L, H = adapter.n_layers, adapter.n_heads
    ci_low, ci_high = summ.ci(0.95)
    n_tests = len(tests)
    margin = np.array([t.margin for t in tests])[:, None, None] * np.ones((1, L, H))
    clustered = summ.extra.get("clustered")
    n_clusters = clustered.g if clustered is not None else summ.n
    # the test runs over clusters (one cluster per item where items have none: the item t-test)
    if clustered is not None:
        p = clustered.p_value(margin)
    else:
        p = stats.one_sided_p_from_sums(summ.n, summ.mean_diff, summ.sd_diff, margin)
    p = np.where(summ.n >= 2, p, np.nan)
    # accuracy intervals: the cluster bootstrap's, widened to the Wilson interval at the number of
    # clusters, so that a small all-correct sample does not get the interval [1, 1]
    acc = np.array([t.metric == "accuracy" for t in tests])[:, None, None]
    w_lo, w_hi = stats.wilson_interval(summ.score * n_clusters, n_clusters)
    with np.errstate(invalid="ignore"):
        ci_low = np.where(acc & np.isfinite(w_lo), np.fmin(ci_low, w_lo), ci_low)
        ci_high = np.where(acc & np.isfinite(w_hi), np.fmax(ci_high, w_hi), ci_high)
    # one family per role (each role is its own claim), over its label-carrying tests only
    p_adj = np.full_like(p, np.nan)
    for role in {t.family for t in tests} - {""}:
        ks = [k for k, t in enumerate(tests) if t.family == role]
        if ks:
            p_adj[ks] = stats.holm(p[ks])
    null_score = null.score if null is not None else np.full((n_tests, L, H), np.nan)
    layer, head = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
    frames = []
    for k, t in enumerate(tests):
        frames.append(
            pd.DataFrame(
                {
                    "model": adapter.name,
                    "layer": layer.ravel(),
                    "head": head.ravel(),
                    "role": t.role,
                    "direction": t.direction,
                    "metric": t.metric,
                    "score": summ.score[k].ravel(),
                    "baseline": summ.baseline[k].ravel(),
                    "baseline_kind": t.baseline_kind,
                    "ci_low": ci_low[k].ravel(),
                    "ci_high": ci_high[k].ravel(),
                    "n": summ.n[k].ravel().astype(int),
                    "p_value": p[k].ravel(),
                    "p_adjusted": p_adj[k].ravel(),
                    "null_score": null_score[k].ravel(),
                    "mass": summ.extra["mass"][k].ravel(),
                    "offset_baseline": t.offset_baseline,
                    "candidate_baseline": t.candidate_baseline,
                    "margin": t.margin,
                    "specials": t.specials,
                    "source": t.source,
                    "subset": t.subset,
                    "family": t.family,
                    "weighting": t.weighting,
                    "sd_diff": summ.sd_diff[k].ravel(),
                    "special_mass": summ.extra["special_mass"][k].ravel(),
                    "heuristic": t.heuristic,
                    "heuristic_baseline": t.heuristic_baseline,
                    "n_clusters": n_clusters[k].ravel().astype(int),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    clears_null = (df["ci_low"] > df["null_score"]) | df["null_score"].isna() | (df["role"] == "broad")
    df["label"] = (df["p_adjusted"] <= alpha) & (df["ci_low"] > df["baseline"]) & clears_null
    df["label"] = df["label"].fillna(False).astype(bool) & (df["family"] != "")
    df["gates"] = _gates(df)
    df["label"] &= df["gates"]
    return df[COLUMNS]


# the strata (source, subset) on which a relation label must also clear the best heuristic (the
# row's baseline there: best offset, first word, nearest / first / k-th noun): the items where the
# heuristics disagree with the gold (required: no such items, no label), and the minimal pairs
# (where the run has them: ``--sources pairs``), whose score must also reach PAIR_SHARE_MIN.
# A head that follows a heuristic scores at most that heuristic there.
LABEL_GATES = {
    "subject_verb": (("all", "attractor"), ("all", "distance 3+"), (MINIMAL_PAIR_SOURCE, "all")),
    "anaphora": ((MINIMAL_PAIR_SOURCE, "all"),),
}
PAIR_SHARE_MIN = 0.5  # a gated head moves its argmax with the cue in at least half of the pairs
# a label from the generated families needs real text behind it where the run has real text of the
# relation (WinoBias, spaCy-silver XSum, CoNLL-U, a user's text): the same head and direction with
# ci_low above the baseline on a real source's label-carrying row
REAL_TEXT_RELATIONS = ("subject_verb", "anaphora")
SYNTHETIC_SOURCES = ("generated", *NON_LABEL_SOURCES)


def _gates(df: pd.DataFrame) -> pd.Series:
    """Per row: False for a label-carrying row of a gated relation whose head does not clear, on
    each of ``LABEL_GATES``' strata (same direction, specials convention and weighting), ci_low >
    that stratum's baseline (and, on the minimal pairs, score >= PAIR_SHARE_MIN), or where the
    run has no items in a required stratum; else True. Directions the stratum has no rows for
    (a reverse direction, on the minimal pairs) are not gated by it."""
    ok = pd.Series(True, index=df.index)
    keys = ["layer", "head", "direction", "specials", "weighting"]
    for relation, strata in LABEL_GATES.items():
        rows = (df["role"] == relation) & (df["family"] != "")
        if not rows.any():
            continue
        for source, sub in strata:
            g = df[(df["role"] == relation) & (df["source"] == source) & (df["subset"] == sub)]
            pairs = source == MINIMAL_PAIR_SOURCE
            if pairs and g.empty:
                continue  # not measured in this run
            passed = (g["ci_low"] > g["baseline"]) & (g["n"] > 0)
            if pairs:
                passed &= g["score"] >= PAIR_SHARE_MIN
            passed = g.assign(passed=passed).set_index(keys)["passed"]
            key = pd.MultiIndex.from_frame(df.loc[rows, keys])
            got = passed.reindex(key)
            if pairs:  # only the directions measured on the pairs
                got = got.where(~got.isna() | key.get_level_values("direction").isin(g["direction"]), True)
            ok.loc[rows] &= got.fillna(False).astype(bool).to_numpy()
    for relation in HEURISTIC_RELATIONS:  # the reverse control: other nouns attend to the query less
        reverse = RELATIONS[relation][1]
        rows = (df["role"] == relation) & (df["family"] != "") & (df["direction"] == reverse)
        ctrl = df[(df["role"] == relation) & (df["subset"] == CONTROL_SUBSET) & (df["direction"] == reverse)]
        if not rows.any() or ctrl.empty:
            continue
        ctrl_score = ctrl.set_index(["source", *keys])["score"]
        key = pd.MultiIndex.from_frame(df.loc[rows, ["source", *keys]])
        against = ctrl_score.reindex(key).to_numpy()  # NaN: no other noun in that source's items
        ok.loc[rows] &= ~(df.loc[rows, "ci_low"].to_numpy() <= against)
    for relation in REAL_TEXT_RELATIONS:
        label_rows = (df["role"] == relation) & (df["family"] != "")
        synthetic = label_rows & df["source"].isin(SYNTHETIC_SOURCES)
        real = df[label_rows & ~df["source"].isin(SYNTHETIC_SOURCES)]
        if real.empty or not synthetic.any():
            continue  # no real text of this relation in the run (df.attrs["real_text"] says so)
        behind = real.assign(passed=real["ci_low"] > real["baseline"]).groupby(keys)["passed"].any()
        key = pd.MultiIndex.from_frame(df.loc[synthetic, keys])
        ok.loc[synthetic] &= behind.reindex(key).fillna(False).astype(bool).to_numpy()
    return ok


def real_text_heads(df: pd.DataFrame) -> pd.DataFrame:
    """Per relation (``REAL_TEXT_RELATIONS``) and direction: the best head on real text (the highest
    score minus baseline among the label-carrying rows of real sources), whether it is labelled,
    and if not what keeps it out: "p" (Holm-adjusted p above alpha), "ci_low" (interval not above
    the baseline), "gates" (a heuristic subset or the minimal pairs)."""
    alpha = float(df.attrs.get("alpha", 0.05))
    lab = df[(df["family"].fillna("") != "") & df["role"].isin(REAL_TEXT_RELATIONS)]
    lab = lab[~lab["source"].isin(SYNTHETIC_SOURCES)]
    rows = []
    for (role, direction), g in lab.groupby(["role", "direction"], sort=True):
        top = g.loc[(g["score"] - g["baseline"]).idxmax()]
        why = [
            name
            for name, bad in (
                ("p", not top["p_adjusted"] <= alpha),
                ("ci_low", not top["ci_low"] > top["baseline"]),
                ("gates", not bool(top["gates"])),
            )
            if bad
        ]
        rows.append(
            dict(
                role=role,
                direction=direction,
                layer=int(top["layer"]),
                head=int(top["head"]),
                source=top["source"],
                score=float(top["score"]),
                baseline=float(top["baseline"]),
                baseline_kind=top["baseline_kind"],
                ci_low=float(top["ci_low"]),
                p_adjusted=float(top["p_adjusted"]),
                label=bool(top["label"]),
                kept_out_by=", ".join(why) if not top["label"] else "",
            )
        )
    return pd.DataFrame(rows)


def headline(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (layer, head, role, direction): the pooled row under the label-carrying
    convention (all sources, all items, specials excluded), with ``label`` true where any of the
    head's label-carrying rows for that role and direction is labelled. What maps and heatmaps show."""
    pooled = (df["source"] == "all") & (df["subset"] == "all") & df["specials"].isin(["-", SPECIALS[0]])
    if "weighting" in df:
        pooled &= df["weighting"] == "attention"
    head = df[pooled].copy()
    lab = df[df["label"]]
    if "weighting" in df:
        lab = lab[lab["weighting"] == "attention"]
    labelled = lab.groupby(["layer", "head", "role", "direction"]).size()
    key = pd.MultiIndex.from_frame(head[["layer", "head", "role", "direction"]])
    head["label"] = key.isin(labelled.index)
    return head.reset_index(drop=True)


def detectable_effect(df: pd.DataFrame, alpha: float = 0.05, power: float = 0.8) -> pd.DataFrame:
    """The power figure, per role, direction and source of the label-carrying rows: the smallest
    true effect over the baseline (margin included) that this run labels with probability ``power``
    after the multiple-comparison control, at the observed variance.

    A paired one-sided t-test with n sentences rejects at level a when mean(d) - margin exceeds
    t(1-a, n-1) * sd / sqrt(n), and does so with probability ``power`` when the true effect is at
    least margin + (t(1-a, n-1) + t(power, n-1)) * sd / sqrt(n). Holm's first step tests at
    a = alpha / m (m: the role's family size), the strictest level any label must pass, so the
    figure is conservative for all but the first label. sd is the median over heads."""
    from scipy import stats as st

    family = df["family"].fillna("")  # a heads.csv read back has NaN for the empty string
    lab = df[family != ""]
    rows = []
    for (role, direction, source), g in lab.groupby(["role", "direction", "source"], sort=False):
        m = int(df[family == role]["p_value"].notna().sum())
        n = int(g["n"].median())
        sd = float(g["sd_diff"].median())
        margin = float(g["margin"].iloc[0])
        if n < 2 or m < 1 or not np.isfinite(sd):
            continue
        a = alpha / m
        delta = margin + (st.t.ppf(1 - a, n - 1) + st.t.ppf(power, n - 1)) * sd / np.sqrt(n)
        rows.append(
            dict(
                role=role,
                direction=direction,
                source=source,
                subset=str(g["subset"].iloc[0]),
                n=n,
                sd_diff=sd,
                family_size=m,
                margin=margin,
                detectable_effect=float(delta),
            )
        )
    return pd.DataFrame(rows)


def labelled_roles(df: pd.DataFrame) -> pd.DataFrame:
    """The labelled rows that make a head's roles: attention-weighted rows with ``label``, and,
    where the table has norm-weighted rows, each boundary role (``NORM_LABEL_ROLES``:
    attention_sink, delimiter, punctuation, sep_eos) split into itself (the norm row is labelled too:
    the head moves information from where it attends) and ``noop_sink`` (it is not). Adds ``effect``
    = score - baseline, ``standardised`` = effect / margin and ``relative``, the ceiling-normalised
    effect (score - baseline) / (ceiling - baseline) (``CEILINGS``; 1 for most roles): the share of
    the way from the baseline to the best score the metric allows."""
    lab = df[df["label"]].copy()
    if "weighting" in df and (df["weighting"] == "norm").any():
        normed = lab[lab["weighting"] == "norm"]
        confirmed = set(zip(normed["layer"], normed["head"], normed["role"]))
        lab = lab[lab["weighting"] == "attention"].copy()
        weight_only = [
            r in NORM_LABEL_ROLES and (l, h, r) not in confirmed
            for l, h, r in zip(lab["layer"], lab["head"], lab["role"])
        ]
    else:
        weight_only = [False] * len(lab)
    lab["effect"] = lab["score"] - lab["baseline"]
    lab["standardised"] = lab["effect"] / lab["margin"].where(lab["margin"] > 0, 0.05)
    ceiling = lab["role"].map(lambda r: CEILINGS.get(r, 1.0)).astype(float)
    room = ceiling - lab["baseline"]
    lab["relative"] = lab["effect"] / room.where(room > 0)
    lab.loc[weight_only, "role"] = "noop_sink"
    return lab


def _sink_layer(df: pd.DataFrame) -> pd.DataFrame:
    """Per head: the attention_sink score by weight (``sink_weight``) and by norm (``sink_norm``,
    NaN without norm rows), from the pooled rows."""
    g = df[(df["role"] == "attention_sink") & (df["source"] == "all")]
    w = g[g["weighting"] == "attention"] if "weighting" in g else g
    out = w.groupby(["layer", "head"])["score"].max().rename("sink_weight").to_frame()
    if "weighting" in g and (g["weighting"] == "norm").any():
        out["sink_norm"] = g[g["weighting"] == "norm"].groupby(["layer", "head"])["score"].max()
    else:
        out["sink_norm"] = np.nan
    return out


def role_map(df: pd.DataFrame) -> pd.DataFrame:
    """One row per head: its primary role (what it does when it is not idling), the effect behind
    it, its other (secondary) roles, and the sink layer of the map beside them.

    A head's labelled roles outside the sink (``SINK_ROLES``: attention_sink, noop_sink) are ranked
    by the ceiling-normalised effect ``relative`` = (score - baseline) / (ceiling - baseline)
    (``labelled_roles``), which puts accuracy roles, mass roles, the induction score (which cannot
    exceed 0.5) and ``broad``'s entropy on one scale; the first is the primary role. A head whose
    only labels are sink roles is ``"idle (sink)"``, one with none "unclassified". The sink is its
    own layer: ``sink`` (the head's sink label, "attention_sink" when the norm lens confirms it,
    "noop_sink" for a boundary label by weight only, "" for none), ``sink_weight`` and ``sink_norm``
    (its attention_sink score by weight and by norm). ``standardised`` (effect / margin) is kept."""
    h = headline(df)
    lab = labelled_roles(df)
    best = lab.sort_values("relative", ascending=False).drop_duplicates(["layer", "head", "role"])
    sinks = _sink_layer(df)
    rows = []
    for (layer, head_), _ in h.groupby(["layer", "head"], sort=True):
        g = best[(best["layer"] == layer) & (best["head"] == head_)]
        active = g[~g["role"].isin(SINK_ROLES)]
        idle = g[g["role"].isin(SINK_ROLES)]
        row = dict(layer=int(layer), head=int(head_), primary="unclassified", effect=np.nan, standardised=np.nan)
        row.update(relative=np.nan, secondary="", sink=", ".join(sorted(set(idle["role"]))))
        if not active.empty:
            top = active.iloc[0]
            row.update(primary=str(top["role"]), effect=float(top["effect"]), standardised=float(top["standardised"]))
            row.update(relative=float(top["relative"]), secondary=", ".join(active["role"].iloc[1:]))
        elif not idle.empty:
            row["primary"] = IDLE
        key = (layer, head_)
        row["sink_weight"] = float(sinks.loc[key, "sink_weight"]) if key in sinks.index else np.nan
        row["sink_norm"] = float(sinks.loc[key, "sink_norm"]) if key in sinks.index else np.nan
        rows.append(row)
    out = pd.DataFrame(rows)
    out["primary"] = pd.Categorical(out["primary"], list(MAP_PRIMARY))
    return out


def probe_heads(
    model,
    n: int = 200,
    seed: int = 0,
    sources: Sequence[str] = ("generated",),
    conllu: str | None = None,
    null_model: bool = True,
    items: Sequence[Item] | None = None,
    **kwargs,
) -> pd.DataFrame:
    """One call: build the dataset (``n`` items per relation from ``sources``, plus a CoNLL-U file's
    ``nsubj`` arcs if given) and classify every head. See ``probe_items`` for the other options."""
    if items is None:
        items = load_items(n=n, seed=seed, sources=sources, conllu=conllu)
    kwargs.setdefault("n_repeat", max(20, min(n, 200)))
    return probe_items(model, items, seed=seed, null_model=null_model, **kwargs)


# --------------------------------------------------------------------------------------------------
# Summaries and examples


def head_summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per head: the roles it holds (with direction where there is one) or 'unclassified';
    the same roles as the map's (``labelled_roles``: boundary heads by weight only are noop_sink)."""
    rows = []
    labelled = labelled_roles(df) if "family" in df else df[df["label"]]
    for (layer, head), _ in df.groupby(["layer", "head"], sort=True):
        lab = labelled[(labelled["layer"] == layer) & (labelled["head"] == head)]
        roles = sorted({r if d == "all" else f"{r} ({d})" for r, d in zip(lab["role"], lab["direction"])})
        rows.append(
            {
                "layer": layer,
                "head": head,
                "roles": ", ".join(roles) if roles else "unclassified",
                "n_roles": len(roles),
            }
        )
    return pd.DataFrame(rows)


def top_head(df: pd.DataFrame, role: str) -> tuple[int, int, bool, str]:
    """(layer, head, labelled, direction) of the best head for a role: the labelled one with the
    highest score, else the highest-scoring one."""
    g = df[df["role"] == role].dropna(subset=["score"])
    if g.empty:
        raise ValueError(f"no rows for role {role!r}")
    lab = g[g["label"]]
    pick = (lab if not lab.empty else g).sort_values("score", ascending=False).iloc[0]
    return int(pick["layer"]), int(pick["head"]), not lab.empty, str(pick["direction"])
