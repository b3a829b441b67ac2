"""interp probe on 2 gloo workers equals 1 worker: the shards are disjoint and cover every sentence
and random sequence, and the merged table is the same (the heads.csv bytes on MiniLM)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch

from analyses import heads
from analyses.cli import main
from interp.distributed import SINGLE, World, launch
from tests.factories import planted_items, planted_model

N_ITEMS, N_REPEAT = 37, 11  # not multiples of the batch size: a short last batch of each kind


def _planted_probe(world: World) -> pd.DataFrame:
    return heads.probe_items(
        planted_model(values=True),
        planted_items(N_ITEMS, seed=2),
        n_repeat=N_REPEAT,
        repeat_length=6,
        n_boot=40,
        batch_size=4,
        weighting=("attention", "norm"),
        seed=3,
        world=world,
    )


def _units(spans) -> list[int]:
    return [u for a, z in spans for u in range(a, z)]


def test_two_workers_equal_one_on_a_planted_model():
    # one torch thread for the single run and each worker (the launcher gives a worker the parent's
    # threads // workers): a float32 sum's last bits may depend on the thread count, and with the
    # parent at 2 threads (PYTEST_WORKERS=0) the two sides differed by 2e-9 relative
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = _planted_probe(SINGLE)
        two = launch(_planted_probe, workers=2, timeout=120)
    finally:
        torch.set_num_threads(before)
    assert one.attrs["workers"] == 1 and two.attrs["workers"] == 2
    # the shards: disjoint, covering every sentence and random sequence once, both non-empty
    a, b = (_units(s) for s in two.attrs["shards"])
    assert a and b and set(a).isdisjoint(b)
    assert sorted(a + b) == list(range(N_ITEMS + N_REPEAT)) == _units(one.attrs["shards"][0])
    # the merged table is the single-process one: counts bitwise, every float column bitwise too
    # (compensated sums; the stated guarantee is 1e-12 relative on means, checked first)
    assert (two["n"] == one["n"]).all()
    for col in ("score", "baseline", "ci_low", "ci_high", "mass", "sd_diff", "null_score"):
        pd.testing.assert_series_equal(two[col], one[col], rtol=1e-12, atol=0, check_exact=False)
    pd.testing.assert_frame_equal(two, one, check_exact=True)
    assert two["label"].any()  # the planted heads are found: the comparison is not of empty tables


def _failing_probe(world: World) -> pd.DataFrame:
    items = planted_items(N_ITEMS, seed=2)
    if world.rank == 1:  # worker 1 gets a sentence longer than the context (16); sorted last, it is in
        # the last sentence batch (9 of 0..9), which worker 1 owns
        items[5] = dataclasses.replace(items[5], words=items[5].words[:-1] + ("old",) * 12 + (".",))
    return heads.probe_items(
        planted_model(), items, n_repeat=0, n_boot=10, batch_size=4, world=world, weighting=("attention",)
    )


def test_a_worker_that_fails_stops_the_probe_and_is_named():
    from interp.distributed import WorkerError

    with pytest.raises(WorkerError, match=r"worker 1 of 2 failed: ValueError: .*sentence") as info:
        launch(_failing_probe, workers=2, timeout=120)
    assert info.value.rank == 1


@pytest.mark.slow
def test_minilm_cli_two_workers_write_the_same_heads_csv(tmp_path, cheap_figures):
    """The main job's sources and options, a few sentences each: `interp probe --workers 2` writes
    the heads.csv `--workers 1` writes, byte for byte."""
    args = ["probe", "--model", "minilm", "--sources", "generated,winobias,spacy,xsum,sonnets", "--n", "4",
            "--n-for", "anaphora=8", "--n-boot", "30", "--batch-size", "8"]  # fmt: skip
    # the one-process reference runs on one thread, as each of the two workers does: a float32 matmul's
    # bits may depend on the thread count (on this machine's CPU they do: p-values then differ in the
    # 6th digit), which is the BLAS library's arithmetic, not the sharding this test checks
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main([*args, "--out", str(tmp_path / "one"), "--workers", "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    assert main([*args, "--out", str(tmp_path / "two"), "--workers", "2"]) == 0
    one, two = (tmp_path / d / "heads.csv" for d in ("one", "two"))
    assert one.read_bytes() == two.read_bytes()
    assert len(pd.read_csv(one)) > 1000 and pd.read_csv(one)["label"].any()
