"""interp validate on 2 gloo workers equals 1 worker: the heads are shared out disjointly and all
ablated, and the validation table, the unlabelled heads and every effect are the same bits; the CLI
writes the same validation.csv."""

from __future__ import annotations

import pandas as pd
import pytest

from analyses import validation as V
from analyses.cli import main
from interp.distributed import SINGLE, World, launch


def _labels() -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(model="planted", layer=0, head=0, role="previous_token", direction="back", score=0.99, label=True),
            dict(model="planted", layer=0, head=1, role="previous_token", direction="back", score=0.9, label=True),
            dict(model="planted", layer=1, head=3, role="induction", direction="back", score=0.5, label=True),
        ]
    )


def _validate(world: World, ablation: str) -> V.ValidationResult:
    model, _ = V.planted_model(seed=0)
    return V.run(
        model, _labels(), prompts=V.planted_prompts(n=10, seed=1), seed=4, ablation=ablation, n_boot=200, world=world
    )


def test_two_workers_equal_one_on_the_planted_model():
    one = _validate(SINGLE, "resample")  # resampled ablation: the seeded draws must not depend on N
    two = launch(_validate, "resample", workers=2, timeout=120)
    # every evaluated head (all 48: the null is every head) ablated by exactly one worker
    a, b = two.info["head_shards"]
    n = one.info["n_heads_evaluated"]
    assert n == 48 and a and b and set(a).isdisjoint(b) and sorted(a + b) == list(range(n))
    assert one.info["head_shards"] == [list(range(n))] and two.info["workers"] == 2
    pd.testing.assert_frame_equal(two.table, one.table, check_exact=True)
    pd.testing.assert_frame_equal(two.effects, one.effects, check_exact=True)
    pd.testing.assert_frame_equal(two.unlabelled, one.unlabelled, check_exact=True)
    assert (one.table["verdict"] == "validated").any()  # not a comparison of empty results


@pytest.mark.slow
def test_minilm_cli_two_workers_write_the_same_validation(tmp_path):
    """`interp validate --workers 2` on MiniLM (a hand-written labels file, a null of 12 heads and one
    per labelled layer: at most 20 heads to share out, encoder probes trained on each worker) writes the
    validation.csv and unlabelled.csv bytes `--workers 1` writes."""
    labels = tmp_path / "heads.csv"
    rows = [dict(layer=l, head=h, role=r, score=0.5, label=True) for l, h, r in
            [(0, 1, "previous_token"), (2, 3, "delimiter"), (4, 5, "subject_verb"), (5, 0, "anaphora")]]  # fmt: skip
    pd.DataFrame(rows).to_csv(labels, index=False)
    args = ["validate", "--model", "minilm", "--labels", str(labels), "--n", "8"]
    args += ["--n-null", "12", "--n-layer-null", "1"]
    assert main([*args, "--out", str(tmp_path / "one")]) == 0
    assert main([*args, "--out", str(tmp_path / "two"), "--workers", "2"]) == 0
    for name in ("validation.csv", "unlabelled.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
