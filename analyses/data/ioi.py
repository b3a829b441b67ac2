"""Indirect-object identification (Wang et al. 2022) as probe items: the clean prompts of the toolkit's
IOI contrastive pairs (``analyses.validation.prompts.contrastive_pairs("ioi", ...)``, whose forms and
draw live here, in the data layer, so that the probe and the pairs share them) with the answer
appended as the query word.

"When Mary and John went to the store, John gave a drink to" + "Mary": the query is the last word
(the answer, the indirect object named again), the target the indirect object's first mention, the
candidates the name positions before the query. The probe reads the relation only predictively
(``analyses.heads.roles.PREDICTIVE["ioi"]``, "final->indirect_object"): on the row of the prompt's
final token ("to"), whose next-token prediction is the answer. The indirect object is by
construction the name mentioned once: that is the task's solution, not a shortcut, so it is no
baseline (the baselines are the best offset, the first name and the last name).
"""

from __future__ import annotations

from collections.abc import Sequence

from analyses.data.items import Item, check_n, rng
from analyses.data.lexicon import IOI_NAMES, IOI_OBJECTS, IOI_PLACES
from interp.alignment import split_words

__all__ = ["IOI_SOURCE", "IOI_TEMPLATES", "ioi_pair", "ioi_prompts", "ioi_items", "ioi_items_from_prompts"]

IOI_SOURCE = "ioi"  # the items' source (``--sources ioi``)
# Wang et al. (2022)'s forms: {A} the indirect object, {B} the subject (named twice), {P}, {O}
IOI_TEMPLATES = [
    "Then, {X} and {Y} went to the {P}. {B} gave a {O} to",
    "When {X} and {Y} got a {O} at the {P}, {B} decided to give it to",
    "Then, {X} and {Y} had a lot of fun at the {P}. {B} gave a {O} to",
    "After {X} and {Y} went to the {P}, {B} gave a {O} to",
    "While {X} and {Y} were working at the {P}, {B} gave a {O} to",
    "Friends {X} and {Y} found a {O} at the {P}. {B} gave it to",
]


def ioi_pair(rng, i: int, words: dict) -> tuple:
    """One IOI pair (Wang et al. 2022): the indirect object {A} is the answer, the subject {B} (named
    twice) the contrast; ABBA and BABA orders alternate. The corruption is their ABC one: the second
    mention of the subject becomes a third name. ``words``: "names" (the names to draw from) and
    "id" (name -> what the answers are given as: a token id, or the name itself). Returns (clean,
    corrupted, the answer's id, the subject's id, False, the form: "ABBA<template>" / "BABA<template>")."""
    names = words["names"]
    a, b, c = (names[k] for k in rng.choice(len(names), 3, replace=False))
    t = int(rng.integers(len(IOI_TEMPLATES)))
    x, y = (a, b) if i % 2 == 0 else (b, a)
    fill = dict(X=x, Y=y, P=IOI_PLACES[rng.integers(len(IOI_PLACES))], O=IOI_OBJECTS[rng.integers(len(IOI_OBJECTS))])
    templ = IOI_TEMPLATES[t]
    clean, corrupted = templ.format(B=b, **fill), templ.format(B=c, **fill)
    order = "ABBA" if i % 2 == 0 else "BABA"
    return clean, corrupted, words["id"][a], words["id"][b], False, f"{order}{t}"


def ioi_prompts(n: int, seed: int = 0, names: Sequence[str] = IOI_NAMES) -> list[tuple[str, str, str]]:
    """``n`` distinct clean IOI prompts as ``contrastive_pairs("ioi", tokenizer, n, seed)`` draws them
    where every one of ``names`` is a single token of the tokenizer (SmolLM2's, GPT-2's: then the
    prompts are the same, prompt for prompt): (prompt, answer, form) each."""
    n, draw = check_n(n, "ioi_prompts"), rng(seed)
    words = {"names": list(names), "id": {w: w for w in names}}
    out: dict[str, tuple[str, str, str]] = {}
    misses = 0
    while len(out) < n and misses <= 2000:  # a repeat is drawn again, as the pairs do
        clean, _, answer, _, _, form = ioi_pair(draw, len(out), words)
        misses = misses + 1 if clean in out else 0
        out.setdefault(clean, (clean, answer, form))
    if len(out) < n:
        raise ValueError(f"could not draw {n} distinct IOI prompts (got {len(out)}); ask for fewer")
    return list(out.values())


def ioi_items_from_prompts(
    prompts: Sequence[str], answers: Sequence[str], forms: Sequence[str] | None = None, names: Sequence[str] = IOI_NAMES
) -> list[Item]:
    """Probe items (relation "ioi", source ``IOI_SOURCE``) from clean IOI prompts and their answers
    (the indirect object's name, e.g. the decoded ``PairSet.right``): the prompt's words (punctuation
    a word of its own) then the answer, the query word. target: the answer's first (only) mention;
    candidates: the positions of ``names`` before the query. Each prompt is a cluster of its own (a
    pair is the unit of the contrastive pairs' statistics). ValueError where the answer is not named
    exactly once before or the prompt has no second name."""
    if len(prompts) != len(answers) or (forms is not None and len(forms) != len(prompts)):
        raise ValueError(f"ioi items: {len(prompts)} prompts, {len(answers)} answers and forms of another length")
    known = set(names)
    out = []
    for k, (prompt, answer) in enumerate(zip(prompts, answers)):
        words = [*split_words(prompt)[0], answer.strip()]
        query = len(words) - 1
        named = [i for i in range(query) if words[i] in known]
        mentions = [i for i in named if words[i] == words[query]]
        if len(mentions) != 1 or len(named) < 2:
            raise ValueError(
                f"ioi prompt {k} {prompt!r}: the answer {answer!r} must be named exactly once before, beside "
                f"another name (got {len(mentions)} mentions among the names {[words[i] for i in named]})"
            )
        meta = [("io", words[query]), ("distance", query - mentions[0]), ("n_names", len(named))]
        if forms is not None:
            meta += [("form", forms[k]), ("order", str(forms[k])[:4])]
        out.append(
            Item(tuple(words), "ioi", query=query, target=mentions[0], candidates=tuple(named), source=IOI_SOURCE,
                 meta=tuple(meta))
        )  # fmt: skip
    return out


def ioi_items(n: int, seed: int = 0) -> list[Item]:
    """``n`` IOI probe items: ``ioi_items_from_prompts`` over ``ioi_prompts(n, seed)``."""
    prompts, answers, forms = zip(*ioi_prompts(n, seed))
    return ioi_items_from_prompts(prompts, answers, forms)
