"""The batched hook engine: the sentences in cluster order and batches (each batch to one worker),
the random repeated-token sequences after them, and one pass of ``blocks.{l}.attn.hook_pattern``
hooks (and ``attn.hook_v`` for the norm lens) that reduces each layer's pattern to per-sentence
scores as it arrives: running sums and bootstrap replicates, merged over the workers. No cache is
kept. ``check_sentences`` refuses what cannot be scored before the first forward pass."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from analyses.data.generated import MINIMAL_PAIR_SOURCE, random_repeated_tokens
from analyses.data.items import Item, is_punctuation, item_location
from analyses.heads.adapter import Adapter, _null_network, adapt
from analyses.heads.design import _item_baseline, _test_row_gold, in_stratum
from analyses.heads.roles import SET_ROLES
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
from interp.distributed import World
from interp.names import act_name, layer_of
from interp.reducers import PairedReducer, PoissonBootstrap, RowBlocks

__all__ = ["check_sentences", "cluster_order"]


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
    """(the stacked plan of the relation tests, test index -> per-sentence baseline, their test indices).
    A retrospective row is the mean over the row word's tokens, the word itself left out of the
    argmax (Clark et al. 2019); a predictive row is the last token of the word before the query, and
    that word competes (a head on the attractor "cabinet" in "The keys near the cabinet | are" is
    wrong)."""
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
            if test.reading == "predictive":  # the last token before the query word: it predicts that word
                toks = toks[-1:]
            else:  # the retrospective row word itself does not compete (Clark et al.); a predictive one does
                others[i, j, r] = False
            rows[i, j, toks] = 1.0 / len(toks)
            gold[i, j] = g
            others[i, j, g] = False
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
