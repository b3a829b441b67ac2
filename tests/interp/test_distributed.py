"""interp.distributed: shards cover every item once, reducers merged over 2 gloo workers equal one
process (counts bitwise, means to 1e-12; in practice bitwise), and a worker that raises, exits or
hangs stops the run with an error naming it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from interp.distributed import SINGLE, WorkerError, World, launch
from interp.reducers import PairedReducer, PoissonBootstrap

ROOT = Path(__file__).resolve().parents[2]


def _data(seed: int, n: int):
    """Scores over 9 orders of magnitude, so that the order of a plain fp64 sum shows."""
    g = torch.Generator().manual_seed(seed)
    scale = 10.0 ** torch.randint(-4, 5, (n, 1, 1), generator=g).double()
    scores = torch.rand(n, 2, 3, generator=g, dtype=torch.float64) * scale
    base = torch.rand(n, generator=g, dtype=torch.float64)
    valid = torch.rand(n, 2, generator=g) > 0.2
    return scores, base, valid


def _reduce_share(world: World, n: int = 203, batch: int = 8, n_boot: int = 40) -> tuple:
    """Every worker reduces its round-robin share of the batches, then the reducer is merged."""
    scores, base, valid = _data(0, n)
    red = PairedReducer((2, 3), n_boot=n_boot, extras=("mass",))
    boot = PoissonBootstrap(n_boot, seed=5)
    batches = [list(range(i, min(i + batch, n))) for i in range(0, n, batch)]
    units: list[int] = []
    plain = torch.zeros(2, 3, dtype=torch.float64)  # what an uncompensated fp64 sum gives
    for k in world.shard(len(batches)):
        u = batches[k]
        units += u
        red.update(slice(None), scores[u], base[u, None, None], valid[u, :, None], boot.weights_for(u))
        plain += torch.where(valid[u, :, None], scores[u], 0.0).sum(0)
    red.merge(world)
    world.sum_([plain])
    return red.summary(), world.gather(units), plain


def test_shards_are_disjoint_and_cover_every_item():
    for size in (1, 2, 3, 7):
        shards = [list(World(rank=r, size=size).shard(23)) for r in range(size)]
        flat = sorted(i for s in shards for i in s)
        assert flat == list(range(23))
        assert all(World(rank=r, size=size).owns(i) for r, s in enumerate(shards) for i in s)


def test_bootstrap_weights_follow_the_unit_not_the_batch():
    boot = PoissonBootstrap(500, seed=3)
    a = boot.weights_for([4, 9, 2])
    b = torch.cat([PoissonBootstrap(500, seed=3).weights_for([9]), boot.weights_for([2, 4])])
    assert torch.equal(a[[1, 2, 0]], b)
    assert not torch.equal(a[0], a[1])  # units differ
    assert not torch.equal(a, PoissonBootstrap(500, seed=4).weights_for([4, 9, 2]))  # seeds differ
    assert abs(float(a.mean()) - 1.0) < 0.1 and abs(float(a.var()) - 1.0) < 0.15  # Poisson(1)
    with pytest.raises(ValueError, match="unit indices must be >= 0"):
        boot.weights_for([-1])


def test_two_gloo_workers_merge_exactly():
    one, (units_one,), plain_one = _reduce_share(SINGLE)
    two, units_two, plain_two = launch(_reduce_share, workers=2, timeout=120)
    # the shards: disjoint, every unit once
    assert set(units_two[0]).isdisjoint(units_two[1]) and sorted(units_two[0] + units_two[1]) == units_one
    assert len(units_two[0]) > 0 and len(units_two[1]) > 0
    # counts and weight sums are integers in fp64: bitwise
    np.testing.assert_array_equal(two.n, one.n)
    # the stated guarantee: means to 1e-12 relative ...
    for field in ("score", "baseline", "mean_diff", "sd_diff"):
        np.testing.assert_allclose(getattr(two, field), getattr(one, field), rtol=1e-12, atol=0)
    np.testing.assert_allclose(two.boot_means, one.boot_means, rtol=1e-12, atol=0)
    # ... and with compensated sums, bitwise in fact, where a plain fp64 sum depends on the order
    assert np.array_equal(two.score, one.score) and np.array_equal(two.boot_means, one.boot_means)
    assert not torch.equal(plain_one, plain_two)


def _fail(world: World, culprit: int, how: str) -> int:
    if world.rank == culprit:
        if how == "raise":
            raise ValueError("planted failure in this worker")
        if how == "exit":
            os._exit(3)
        time.sleep(60)  # hang
    world.wait_all("the end of the run")
    return world.rank


@pytest.mark.parametrize("how", ["raise", "exit"])
def test_a_failing_worker_stops_the_run_at_once_and_is_named(how):
    start = time.monotonic()
    with pytest.raises(WorkerError, match="worker 1 of 2 failed") as info:
        launch(_fail, 1, how, workers=2, timeout=120)
    assert info.value.rank == 1
    if how == "raise":
        assert "ValueError: planted failure in this worker" in str(info.value)
    else:
        assert "exited with code 3" in str(info.value)
    assert time.monotonic() - start < 60  # did not wait for the 120 s timeout


def test_a_hanging_worker_is_named_after_the_timeout():
    with pytest.raises(WorkerError, match="worker 1 of 2 failed") as info:
        launch(_fail, 1, "hang", workers=2, timeout=3)
    assert "did not reach the end of the run (it stopped, or hung past the 3 s timeout)" in str(info.value)


class _Planted:
    """Unpickling it runs code: what another process could put where the parent reads a result."""

    def __reduce__(self):
        return (os.system, (f"touch {os.environ['INTERP_TEST_MARKER']}",))


def _plant_over_the_result(world: World) -> int:
    """Rank 1 waits for rank 0's result file, then replaces it with a planted pickle (another
    process of the same user could do the same in the run's folder)."""
    import glob
    import pickle

    if world.rank == 1:
        folder = glob.glob(os.path.join(os.environ["TMPDIR"], "interp-workers-*"))[0]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = [n for n in os.listdir(folder) if n.startswith("result.") and not n.endswith(".part")]
            if found:
                planted = os.path.join(folder, "planted")
                with open(planted, "wb") as f:
                    f.write(pickle.dumps(_Planted()))
                os.replace(planted, os.path.join(folder, found[0]))
                break
            time.sleep(0.05)
    return world.rank


def test_a_planted_result_is_never_unpickled(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    monkeypatch.setenv("INTERP_TEST_MARKER", str(marker))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the workers' folder, where rank 1 finds it
    monkeypatch.setattr(tempfile, "tempdir", None)
    with pytest.raises(WorkerError, match="not written by this run's worker"):
        launch(_plant_over_the_result, workers=2, timeout=60)
    assert not marker.exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith("interp-workers-")]  # removed


def _sleep_then_return(world: World) -> bytes:
    time.sleep(30)
    return b"x" * 1_000_000


def test_a_stopped_parent_stops_its_workers_and_leaves_no_folder(tmp_path, monkeypatch):
    """SIGTERM (or Ctrl-C) in the parent while the workers run: the workers are stopped and the
    run's folder removed; none writes its result there afterwards."""
    import signal

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)

    class Stopped(BaseException):
        pass

    def stop(signum, frame):
        raise Stopped

    previous = signal.signal(signal.SIGALRM, stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)  # while the workers start or sleep
        with pytest.raises(Stopped):
            launch(_sleep_then_return, workers=2, timeout=60)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    import multiprocessing

    assert multiprocessing.active_children() == []  # none left to write its result afterwards
    assert os.listdir(tmp_path) == []


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        launch(_fail, 1, "raise", workers=0)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        launch(_fail, 1, "raise", workers=2, timeout=0)


def _torchrun_main() -> None:
    """Run by torchrun below: each process joins the group torchrun set up."""
    out = launch(_reduce_share, workers=2, timeout=60)
    summary, units, _ = out
    if int(os.environ["RANK"]) == 0:
        np.save(os.environ["INTERP_TEST_OUT"], np.concatenate([summary.score.ravel(), summary.n.ravel()]))


def test_torchrun_group_is_joined(tmp_path):
    out = tmp_path / "score.npy"
    # TMPDIR: torchrun leaves a torchelastic_* folder in the temp dir; keep it in the test's own
    env = {
        **os.environ,
        "INTERP_TEST_OUT": str(out),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
        "TMPDIR": str(tmp_path),
    }
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    cmd += ["-m", "tests.interp.test_distributed"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    one = _reduce_share(SINGLE)[0]
    assert np.array_equal(np.load(out), np.concatenate([one.score.ravel(), one.n.ravel()]))


if __name__ == "__main__":
    _torchrun_main()
