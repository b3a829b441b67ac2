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
``learned_sink``        mass         gpt-oss only: the learned sink logit's part of each    0
                                     row (1 - the row's sum), on attention_sink's rows
``sep_eos``             mass         on trailing special tokens ([SEP], EOS), else on the   uniform
                                     sentence-final punctuation word
``punctuation``         mass         on punctuation words                                   uniform
``delimiter``           mass         on punctuation, special tokens and the first token     uniform
``broad``               entropy      row entropy / log(visible keys)                        0.9 (fixed)
``duplicate_token``     mass         on earlier copies of the same token (TL ``mul``)       uniform
``induction``           mass         on the token after an earlier copy (TL ``mul``)        uniform
``subject_verb``        accuracy     retrospective: the row word's largest weight (self      best offset,
                                     excluded) is the gold partner (Clark et al., 2019);    first word,
                                     predictive (causal): the largest weight of the last    noun
                                     token before the verb (its own word competing) is on   heuristics
                                     the subject
``anaphora``            accuracy     same, pronoun <-> antecedent; predictive: the token     + nearest
                                     before the pronoun -> the antecedent                   candidate
``ioi``                 accuracy     predictive only (causal): the IOI prompt's final token  best offset,
                                     ("... gave a drink to") -> the indirect object's        first word,
                                     first mention (Wang et al., 2022)                      first / last
                                                                                            name
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
tokens, *from* a word averages over them. That is the **retrospective** reading (``reading`` column):
the query word's own row. A causal model also gets the **predictive** reading of subject_verb and
anaphora (``roles.PREDICTIVE``: ``pre-verb->subject``, ``pre-pronoun->antecedent``), where a head can
change the prediction of the query word: the row is the last token of the word before the query, the
gold the target; items whose target is that word are left out, and the row's own word competes in the
argmax (a head on the attractor "cabinet" in "The keys near the cabinet | are" is wrong), unlike the
retrospective reading, where Clark et al. leave the row word out. Its labels are a family of their own
(``subject_verb@predictive``); the strata, heuristics and baselines are the retrospective ones' (the
best offset relative to the row word). ``ioi`` (source ``ioi``, ``analyses.data.ioi``) is read only
predictively, so an encoder refuses it. Special tokens take Clark et al.'s convention by default
(``specials="exclude"``: the largest weight among the sentence's other words; ``"include"``: they
compete as columns of their own), both reported. Relations are scored per source and subset; the
rows that carry labels are each source on its own, on the relation's ``LABEL_SUBSET`` (anaphora:
antecedent neither the subject nor the nearest noun). ``weighting=("attention", "norm")`` scores
every test again on Kobayashi et al.'s norm-weighted attention; boundary labels need both.

Statistics (see ``interp.stats``): per row a one-sided t-test over clusters (``Item.cluster``; an
item without one is its own) of the mean per-item score minus baseline against a minimum effect
``margin``, with the cluster-robust (Liang-Zeger) standard error and clusters - 1 degrees of
freedom; Holm-Bonferroni within each role's family of label-carrying rows (family-wise error <=
``alpha`` per role); a 95% streaming Poisson-bootstrap interval over clusters (one weight per
cluster; accuracy rows widened to the Wilson interval at the number of clusters). ``label`` is true
where the Holm-adjusted p <= alpha, the interval's lower end clears the baseline, and (except for
``broad``) clears the same head's score in a randomly initialised model of the same architecture
(``null_score``). ``detectable_effect`` gives the power figure, ``role_map`` the primary role of
every head. docs/head-roles.md has the whole story.

Everything is reduced inside ``blocks.{l}.attn.hook_pattern`` hooks batch by batch: no cache is
kept. The analysis needs only those hook names, so it runs on the toolkit's ``models.Transformer``
and on a ``transformer_lens.TransformerBridge`` alike (see ``adapt``).

The probe lives in rooms, read in this order: ``adapter`` (what the probe needs from a model),
``design`` (the tests, strata, noun heuristics and baselines), ``engine`` (the batched hook pass and
its reducers), ``labels`` (the table, Holm, the gates, the role map) and ``summaries``; this module
runs them (``probe_items``, ``probe_heads``). ``defaults`` holds the one record of defaults.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Sequence

import pandas as pd

from analyses.data.corpora import left_out_lines
from analyses.data.items import USER_FILE_SOURCES, Item
from analyses.data.sources import load_items
from analyses.heads.adapter import _layer_types, adapt
from analyses.heads.defaults import DEFAULTS, n_repeat_for
from analyses.heads.design import SYNTHETIC_SOURCES, _check_options, _tests, source_of
from analyses.heads.engine import _null_pass, _Pass, _run, check_sentences, cluster_order
from analyses.heads.labels import _table
from interp.distributed import World, current

__all__ = ["probe_items", "probe_heads"]

# names this module held before the probe was split into its rooms: still found here, with a warning
_MOVED = {
    "analyses.heads.adapter": ("Adapter", "sink_tokenizer", "SINK_TOKENS"),
    "analyses.heads.design": (
        "in_stratum",
        "SUBSETS",
        "LABEL_SUBSET",
        "CONTROL_SUBSET",
        "noun_heuristics",
        "MAX_NOUN_K",
        "HEURISTIC_RELATIONS",
        "CONTROL_SOURCES",
        "NON_LABEL_SOURCES",
    ),
    "analyses.heads.labels": ("headline", "role_map", "labelled_roles", "LABEL_GATES", "PAIR_SHARE_MIN"),
    "analyses.heads.summaries": ("head_summary", "top_head", "detectable_effect", "real_text_heads"),
}


def __getattr__(name: str):  # noqa: ANN202
    for module, names in _MOVED.items():
        if name in names:
            warnings.warn(
                f"analyses.heads.probe.{name} is now {module}.{name} (or analyses.heads.{name})",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'analyses.heads.probe' has no attribute {name!r}")


def probe_items(
    model,
    items: Sequence[Item],
    *,
    n_repeat: int = n_repeat_for(DEFAULTS.n),
    repeat_length: int = DEFAULTS.repeat_length,
    seed: int = DEFAULTS.seed,
    null_model: bool = True,
    null_n: int | None = DEFAULTS.null_n,
    n_boot: int = DEFAULTS.n_boot,
    alpha: float = DEFAULTS.alpha,
    margin: float = DEFAULTS.margin,
    mass_margin: float = DEFAULTS.mass_margin,
    batch_size: int = DEFAULTS.batch_size,
    tokenizer=None,
    progress: bool = False,
    specials: Sequence[str] = DEFAULTS.specials,
    weighting: Sequence[str] = DEFAULTS.weighting,
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
    ``weighting``: "attention" (always, first: it carries the labels) and "norm" (Kobayashi et
    al. 2020: every test again on a_ij ||v_j W_O|| renormalised per row; a boundary label then needs
    the norm row to pass too, and the other norm rows are descriptive); both by default, as
    ``interp probe`` runs (``DEFAULTS``; ``("attention",)`` skips the norm lens).
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
    if not adapter.is_causal and any(it.relation == "ioi" for it in items):
        raise ValueError(
            f"{adapter.name} is an encoder: the ioi relation is read only predictively (the final token -> the "
            "indirect object), which needs a causal model; drop ioi from the sources"
        )
    specials, weighting = tuple(specials), tuple(weighting)
    _check_options(items, alpha, specials, weighting)
    check_sentences(adapter, items)
    learned = bool(getattr(getattr(adapter.model, "cfg", None), "attn_sinks", False))  # gpt-oss
    tests = _tests(items, adapter.is_causal, n_repeat, margin, mass_margin, specials, weighting, learned)
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
    df.attrs.update(_attrs(adapter, items, clusters, null is not None, world, shards))
    df.attrs.update(
        n_repeat=n_repeat,
        repeat_length=min(repeat_length, adapter.n_ctx // 2),
        seed=seed,
        n_boot=n_boot,
        alpha=alpha,
        margin=margin,
        mass_margin=mass_margin,
        specials=list(specials),
        weighting=list(weighting),
    )
    return df


def _attrs(adapter, items: list, clusters: list, null_model: bool, world: World, shards: list) -> dict:
    """What a heads table's ``attrs`` say about the model, the data and the statistics (the run's
    options are added beside them)."""
    return dict(
        model=adapter.name,
        causal=adapter.is_causal,
        n_layers=adapter.n_layers,
        n_heads=adapter.n_heads,
        n_items=len(items),
        sources=pd.Series([it.source.split(":")[0] for it in items]).value_counts().to_dict(),
        relations=pd.Series([it.relation for it in items]).value_counts().to_dict(),
        user_files=_user_files(items),
        null_model=null_model,
        correction="holm per role",
        sink=adapter.sink,
        layer_types=_layer_types(adapter),
        test="paired one-sided t over clusters (Liang-Zeger standard error, clusters - 1 df)",
        interval="95% cluster Poisson bootstrap; accuracy rows widened to the Wilson interval at the clusters",
        n_clusters=len(set(clusters)),
        real_text=sorted({source_of(it) for it in items} - set(SYNTHETIC_SOURCES) - {"xsum", "sonnets"}),
        workers=world.size,
        shards=[[tuple(span) for span in spans] for spans in shards],
    )


def _user_files(items: Sequence[Item]) -> dict[str, dict]:
    """Per file of the user's (CoNLL-U, text): its path, the sentences and the items drawn from it;
    for a text file also its sentences in all (``n_lines``) and those that gave no item, with why
    (``left_out``: (line, sentence, why))."""
    out: dict[str, dict] = {}
    for it in items:
        kind, _, path = it.source.partition(":")
        if kind in USER_FILE_SOURCES and path:
            f = out.setdefault(path, {"kind": kind, "sentences": set(), "items": 0})
            f["sentences"].add(it.info.get("sentence_line", it.words))  # two equal sentences count twice
            f["items"] += 1
    left = left_out_lines(items)  # a text file's lines that gave no item, and why
    return {
        p: {"kind": f["kind"], "sentences": len(f["sentences"]), "items": f["items"], **left.get(p, {})}
        for p, f in out.items()
    }


def probe_heads(
    model,
    n: int = DEFAULTS.n,
    seed: int = DEFAULTS.seed,
    sources: Sequence[str] = ("generated",),
    conllu: str | None = None,
    null_model: bool = True,
    items: Sequence[Item] | None = None,
    **kwargs,
) -> pd.DataFrame:
    """One call: build the dataset (``n`` items per relation from ``sources``, plus a CoNLL-U file's
    ``nsubj`` arcs if given) and classify every head, with ``interp probe``'s defaults
    (``DEFAULTS``: attention and norm weighting). See ``probe_items`` for the other options."""
    if items is None:
        items = load_items(n=n, seed=seed, sources=sources, conllu=conllu)
    kwargs.setdefault("n_repeat", n_repeat_for(n))
    return probe_items(model, items, seed=seed, null_model=null_model, **kwargs)
