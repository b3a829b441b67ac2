"""A user's gold treebank in CoNLL-U: subject-verb items from its ``nsubj`` arcs, read strictly
(malformed input raises ValueError naming the file and the line), and the strict UTF-8 line reader
that the plain-text reader (``analyses.data.corpora.read_text``) shares.
"""

from __future__ import annotations

import re
from pathlib import Path

from analyses.data.items import Item
from interp.io import decode_text

__all__ = ["read_conllu", "readable_file"]

_NOMINAL = {"NOUN", "PROPN", "PRON"}  # the universal POS tags of a noun-like word (spaCy uses them too)

_ID = re.compile(r"^[1-9][0-9]*$")
_RANGE = re.compile(r"^[1-9][0-9]*-[1-9][0-9]*$")
_EMPTY = re.compile(r"^[0-9]+\.[1-9][0-9]*$")


def _utf8_lines(path: Path) -> list[str]:
    """The file's lines without line ends; a UTF-8 byte-order mark is dropped. Bytes that are not
    UTF-8 raise ValueError naming the file and the line."""
    text = decode_text(path.read_bytes(), path, "UTF-8 (convert it, e.g. `iconv -f latin1 -t utf-8`)")
    return [line.rstrip("\r") for line in text.split("\n")]


def _check_tree(path: Path, sent: list[tuple[int, list[str]]], heads: list[int | None]) -> None:
    """A dependency tree: at most one root (HEAD 0) and no cycle (every annotated chain of heads
    ends at the root or at an unannotated "_"). Raises ValueError at FILE:LINE of the offending word."""
    roots = [k for k, h in enumerate(heads) if h == 0]
    if len(roots) > 1:
        first, second = roots[0], roots[1]
        raise ValueError(
            f"{path}:{sent[second][0]}: a second root (HEAD 0) in one sentence: word {second + 1} "
            f"{sent[second][1][1]!r}, besides word {first + 1} {sent[first][1][1]!r} at line {sent[first][0]}; "
            "a sentence has exactly one root"
        )
    state = [0] * len(heads)  # 0 unvisited, 1 on the current chain, 2 known to end well
    for start in range(len(heads)):
        chain, k = [], start
        while k is not None and state[k] == 0:
            state[k] = 1
            chain.append(k)
            h = heads[k]
            k = None if not h else h - 1
        if k is not None and state[k] == 1:  # came back onto this chain: a cycle
            cycle = chain[chain.index(k) :]
            i = cycle.index(min(cycle))
            cycle = cycle[i:] + cycle[:i]
            words = " -> ".join(str(c + 1) for c in cycle + cycle[:1])
            raise ValueError(
                f"{path}:{sent[cycle[0]][0]}: cycle in the HEAD relations: words {words} never reach the root "
                "(column 7 must make a tree: every word's chain of heads ends at HEAD 0)"
            )
        for c in chain:
            state[c] = 2


def _conllu_word(path: Path, lineno: int, line: str, n_before: int) -> list[str] | None:
    """The 10 columns of a syntactic word's line, None for a multiword range or an empty node;
    ValueError at FILE:LINE for a malformed line (``n_before``: the sentence's words so far)."""
    cols = line.split("\t")
    if len(cols) != 10:
        raise ValueError(
            f"{path}:{lineno}: expected 10 tab-separated columns "
            f"(ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC), got {len(cols)}: {line[:80]!r}"
        )
    tid = cols[0]
    if _RANGE.match(tid) or _EMPTY.match(tid):
        return None  # multiword token range or empty node: not a syntactic word of the tree
    if not _ID.match(tid):
        raise ValueError(f"{path}:{lineno}: ID {tid!r} is not an integer, a range (1-2) or an empty node (1.1)")
    if int(tid) != n_before + 1:
        raise ValueError(f"{path}:{lineno}: ID {tid} out of sequence: expected {n_before + 1}")
    if not cols[1] or cols[1] != cols[1].strip():
        raise ValueError(f"{path}:{lineno}: FORM {cols[1]!r} is empty or has surrounding spaces")
    return cols


def _conllu_sentences(path: Path):
    """Yield (first line, [(line number, columns)] of the syntactic words, sent_id) per sentence,
    in file order; each sentence is yielded before the next one's lines are checked."""
    sent: list[tuple[int, list[str]]] = []
    sent_id: str | None = None
    first = 0  # the line the sentence starts at (its first comment or word line)
    for lineno, line in enumerate(_utf8_lines(path), 1):
        if not line.strip():
            if sent:
                yield first, sent, sent_id
            sent, sent_id, first = [], None, 0
            continue
        first = first or lineno
        if line.startswith("#"):
            m = re.match(r"#\s*sent_id\s*=\s*(.*)$", line)
            if m:
                sent_id = m.group(1).strip()
            continue
        cols = _conllu_word(path, lineno, line, len(sent))
        if cols is not None:
            sent.append((lineno, cols))
    if sent:
        yield first, sent, sent_id


def _conllu_heads(path: Path, sent: list[tuple[int, list[str]]]) -> list[int | None]:
    """The sentence's HEAD column as integers (None: "_", unannotated), checked to make a tree."""
    n = len(sent)
    heads: list[int | None] = []
    for lineno, cols in sent:
        h = cols[6]
        if h == "_":
            heads.append(None)
            continue
        if not _ID.match(h) and h != "0":
            raise ValueError(f"{path}:{lineno}: HEAD {h!r} is not an integer (column 7 must be 0..{n} or _)")
        h = int(h)
        if h > n:
            raise ValueError(
                f"{path}:{lineno}: HEAD {h} is out of range: the sentence has {n} words (heads are 0..{n})"
            )
        heads.append(h)
    _check_tree(path, sent, heads)
    return heads


def _conllu_items(source: str, first: int, sent: list, sent_id: str | None, heads: list) -> list[Item]:
    """One subject-verb Item per nsubj arc of one sentence."""
    words = tuple(cols[1] for _, cols in sent)
    nominal = [k for k, (_, cols) in enumerate(sent) if cols[3] in _NOMINAL]
    items = []
    for k, (lineno, cols) in enumerate(sent):
        rel = cols[7]
        h = heads[k]
        if rel.split(":")[0] not in ("nsubj", "nsubjpass") or not h:
            continue
        q, tg = h - 1, k  # q != tg: _check_tree refused self-loops
        cands = sorted({c for c in nominal if c < q} | {tg})
        meta = (
            ("family", "conllu"),
            ("dep", rel),
            ("verb_upos", sent[q][1][3]),
            ("subject_upos", cols[3]),
            ("distance", q - tg),
            ("subject_first", tg < q),
            ("sent_id", sent_id),
            ("line", lineno),
            ("sentence_line", first),
        )
        items.append(
            Item(
                words,
                "subject_verb",
                query=q,
                target=tg,
                candidates=tuple(cands),
                source=source,
                meta=meta,
                cluster=f"sentence {first}",  # the arcs of one sentence share it
            )
        )
    return items


def readable_file(path, what: str) -> Path:
    """``path`` if it can be read as a stream (a regular file or a pipe): ``interp.io.readable_input``."""
    from interp.io import readable_input

    return readable_input(path, what)


def read_conllu(path) -> list[Item]:
    """Subject-verb items from a gold treebank in CoNLL-U: one Item per ``nsubj`` arc (any
    subtype: ``nsubj:pass``, ``nsubj:outer``; and UD v1 ``nsubjpass``).

    Words are the syntactic words (integer ids); multiword token ranges ("1-2") and empty nodes
    ("1.1") are skipped, so "don't" = "do" + "n't" as the treebank splits it. query = the head
    (verb or copular predicate, as the treebank has it), target = the subject; candidates = words
    tagged NOUN/PROPN/PRON before the head, plus the subject. A HEAD of "_" means unannotated.
    meta ``line``: the subject's line, ``sentence_line``: the line the sentence starts at.

    Malformed input raises ValueError naming the file, the line number and what is wrong: a
    token line without 10 tab-separated columns, a non-integer id or head, ids out of sequence,
    a head outside the sentence, a sentence with two roots or a cycle in its heads (such a tree is
    refused, not skipped: a treebank with broken trees has broken gold labels), bytes that are not
    UTF-8. A UTF-8 byte-order mark is accepted. A file with no nsubj arc raises too. ``path`` may
    be a pipe (``<(zcat x.conllu.gz)``): it is read once.
    """
    path = readable_file(path, "CoNLL-U file")
    source = f"conllu:{path}"
    items: list[Item] = []
    n_sentences = 0
    for first, sent, sent_id in _conllu_sentences(path):
        n_sentences += 1
        items += _conllu_items(source, first, sent, sent_id, _conllu_heads(path, sent))
    if not items:
        raise ValueError(f"{path}: no nsubj arcs found in {n_sentences} sentences (need DEPREL nsubj or nsubj:*)")
    return items
