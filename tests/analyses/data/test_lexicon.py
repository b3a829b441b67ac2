"""The lexicon: one home for the generators' and the validation prompts' word lists, which agree
where they overlap."""

import analyses.data.generated as generated
import analyses.validation.prompts as prompts
from analyses.data import lexicon
from analyses.data.lexicon import noun_gender, noun_number


def test_the_prompts_draw_from_the_lexicon_lists():
    # the same objects, not copies: one edit of a list reaches every builder that draws from it
    assert prompts._SV_SUBJ is lexicon.PROMPT_SV_SUBJECTS and prompts._GENDER is lexicon.GENDER_PAIRS
    assert prompts._PAIR_SV_SUBJ is lexicon.PAIR_SV_SUBJECTS and prompts._IOI_NAMES is lexicon.IOI_NAMES
    assert generated.ANIMATE is lexicon.ANIMATE and generated.noun_gender is noun_gender


def test_the_prompts_gender_pairs_agree_with_the_generators_genders():
    for male, female in lexicon.PAIR_GENDER_PAIRS:  # GENDER_PAIRS and three more
        assert (noun_gender(male), noun_gender(female)) == ("m", "f"), (male, female)
    singular = {"men": "man", "women": "woman"}
    for g, words in lexicon.GENDER_PLURALS.items():  # 0: male plurals, 1: female (GENDER_PAIRS' order)
        for w in words:
            assert noun_number(w) in ("pl", None) and noun_gender(singular.get(w, w[:-1])) == "mf"[g], w


def test_the_prompts_noun_pairs_agree_with_the_generators_numbers():
    pairs = lexicon.PAIR_SV_SUBJECTS + lexicon.PAIR_SV_ATTRACTORS + lexicon.PAIR_SV_PEOPLE
    known = 0
    for sg, pl in pairs:
        assert noun_number(sg) in ("sg", None) and noun_number(pl) in ("pl", None), (sg, pl)
        known += noun_number(sg) is not None
    assert known >= len(pairs) - 2  # all but "song" (and at most one more) are in the generators' lexicon


def test_no_singular_noun_of_the_generators_ends_in_s():
    for sg, pl in lexicon.ANIMATE + lexicon.INANIMATE:
        assert not sg.endswith("s") and sg != pl, (sg, pl)
