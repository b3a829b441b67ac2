"""Contrastive pairs (``contrastive_pairs``, ``solved``): the API the circuits work builds on."""

import dataclasses
import re

import numpy as np
import pytest
import torch

from analyses.validation.prompts import PAIR_TASKS, contrastive_pairs, pair_logit_diff, solved


@pytest.fixture(scope="module")
def smol_tok(hf_smollm2):
    import models

    return models.Tokenizer(hf_smollm2[1])


@pytest.mark.parametrize("task", PAIR_TASKS)
def test_pairs_same_length_single_token_answers(smol_tok, task):
    p = contrastive_pairs(task, smol_tok, 120, seed=3)
    hf = smol_tok.hf
    assert len(p) == 120 and p.clean.shape == p.corrupted.shape == p.attention_mask.shape
    assert len(set(p.clean_texts)) == 120  # distinct prompts
    lengths = p.attention_mask.sum(1)
    sink = [hf.convert_tokens_to_ids("<|endoftext|>")]  # SmolLM2's input convention: the probe's sink first
    assert p.input == "prepend <|endoftext|>" and (p.clean[:, 0] == sink[0]).all()
    for i in range(len(p)):
        n = int(lengths[i])
        assert p.attention_mask[i, :n].all() and not p.attention_mask[i, n:].any()  # right padding
        assert int(p.position[i]) == n - 1  # SmolLM2 adds no [SEP]: the answer is read at the last token
        if task != "induction":  # the rows are what the tokenizer makes of the texts, each alone
            assert sink + hf.encode(p.clean_texts[i], add_special_tokens=False) == p.clean[i, :n].tolist()
            assert sink + hf.encode(p.corrupted_texts[i], add_special_tokens=False) == p.corrupted[i, :n].tolist()
        for t in (int(p.right[i]), int(p.wrong[i])):  # answers are single tokens
            assert hf.encode(hf.decode([t]), add_special_tokens=False) == [t]
        assert p.right[i] != p.wrong[i]
        assert not torch.equal(p.clean[i, :n], p.corrupted[i, :n])
    assert int(p.held_out.sum()) == 30  # the 25% held out
    same = contrastive_pairs(task, smol_tok, 120, seed=3)
    assert torch.equal(same.clean, p.clean) and torch.equal(same.held_out, p.held_out)
    assert not torch.equal(contrastive_pairs(task, smol_tok, 120, seed=4).clean, p.clean)


def test_pair_contents_follow_the_cue(smol_tok):
    hf = smol_tok.hf
    sv = contrastive_pairs("subject_verb", smol_tok, 40, seed=0)
    is_, are = (hf.encode(w, add_special_tokens=False)[0] for w in (" is", " are"))
    assert 15 <= int(sv.attractor.sum()) <= 25  # half with an attractor
    for i in range(len(sv)):
        words = sv.clean_texts[i].split()
        plural = words[1].endswith("s")  # the subjects' plurals are regular
        assert int(sv.right[i]) == (are if plural else is_), sv.clean_texts[i]
        diff = (sv.clean[i] != sv.corrupted[i]).nonzero()[:, 0].tolist()
        assert diff == [2]  # only the subject (<|endoftext|> is token 0, "The" token 1) changes
    ind = contrastive_pairs("induction", smol_tok, 40, seed=0)
    for i in range(len(ind)):
        k = int(ind.template[i].split("=")[1]) + 1  # after the sink token
        assert int(ind.clean[i, k]) == int(ind.right[i]) and int(ind.corrupted[i, k]) == int(ind.wrong[i])
        assert (ind.clean[i] != ind.corrupted[i]).nonzero()[:, 0].tolist() == [k]
        assert int(ind.clean[i, ind.position[i]]) == int(ind.clean[i, k - 1])  # the token before the answer
    ioi = contrastive_pairs("ioi", smol_tok, 40, seed=0)
    for i in range(len(ioi)):
        io, s = hf.decode([int(ioi.right[i])]).strip(), hf.decode([int(ioi.wrong[i])]).strip()
        clean, corrupted = re.findall(r"\w+", ioi.clean_texts[i]), re.findall(r"\w+", ioi.corrupted_texts[i])
        assert clean.count(io) == 1 and clean.count(s) == 2
        assert corrupted.count(s) == 1  # ABC: the subject's second mention is a third name


def test_solved_is_the_clean_logit_difference(smollm2, one_thread):
    p = contrastive_pairs("pronoun_gender", smollm2.tokenizer, 24, seed=1)
    mask = solved(smollm2, p, batch_size=7)  # batches of padded pairs
    alone = []
    with torch.no_grad():
        for i in range(len(p)):
            n = int(p.attention_mask[i].sum())
            logits = smollm2(p.clean[i : i + 1, :n])
            alone.append(float(logits[0, -1, p.right[i]] - logits[0, -1, p.wrong[i]]))
    alone = np.array(alone)
    assert mask.tolist() == (alone > 0).tolist()
    assert 0 < int(mask.sum()) < len(p)  # this task has prompts the model gets wrong: the filter bites
    kept = p.subset(mask)
    assert (pair_logit_diff(smollm2, kept) > 0).all() and len(kept) == int(mask.sum())
    swapped = dataclasses.replace(p.subset(np.arange(len(p))), right=p.wrong.clone(), wrong=p.right.clone())
    assert swapped.clean_texts == p.clean_texts  # a PairSet (read-only, checked): a changed copy keeps its text
    assert solved(smollm2, swapped).tolist() == (alone < 0).tolist()


def test_pairs_bad_input(smol_tok):
    with pytest.raises(ValueError, match="unknown task 'sv'"):
        contrastive_pairs("sv", smol_tok, 10)
    with pytest.raises(ValueError, match="positive integer"):
        contrastive_pairs("ioi", smol_tok, 0)
    with pytest.raises(TypeError, match="needs a tokenizer"):
        contrastive_pairs("ioi", "gpt2", 10)
    with pytest.raises(ValueError, match="distinct"):
        contrastive_pairs("subject_verb", smol_tok, 100000)
    p = contrastive_pairs("ioi", smol_tok, 8)
    with pytest.raises(ValueError, match="mask over 8 pairs"):
        p.subset(torch.ones(5, dtype=torch.bool))
