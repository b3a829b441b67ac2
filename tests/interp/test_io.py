"""The one writer (atomic files and folders) and the one number/table formatter."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest

from interp.display import fmt, md_table
from interp.io import atomic_dir, atomic_save, atomic_write


def test_atomic_write_replaces_and_leaves_nothing_behind(tmp_path):
    target = tmp_path / "sub" / "report.md"
    atomic_write(target, "old")
    atomic_write(target, b"new \xe2\x9c\x93")
    assert target.read_text(encoding="utf-8") == "new \u2713"
    assert os.listdir(target.parent) == ["report.md"]
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)  # an ordinary file, not mkstemp's 0600


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "report.md"
    atomic_write(target, "old")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["report.md"]


def test_atomic_save_passes_a_path_with_the_suffix_and_cleans_up_on_error(tmp_path):
    seen = []
    atomic_save(tmp_path / "t.csv", lambda p: (seen.append(p.suffix), pd.DataFrame({"a": [1]}).to_csv(p)))
    assert seen == [".csv"] and (tmp_path / "t.csv").read_text().startswith(",a")

    def half_then_fail(p):
        p.write_text("half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        atomic_save(tmp_path / "t.csv", half_then_fail)
    assert (tmp_path / "t.csv").read_text().startswith(",a")
    assert sorted(os.listdir(tmp_path)) == ["t.csv"]


def test_atomic_dir_swaps_a_whole_folder_or_nothing(tmp_path):
    target = tmp_path / "ckpt"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("1")
        assert not target.exists()  # nothing visible before the block ends
    assert (target / "a.txt").read_text() == "1"
    with pytest.raises(ValueError):
        with atomic_dir(target) as tmp:
            (tmp / "b.txt").write_text("2")
            raise ValueError("crash half-way")
    assert sorted(os.listdir(target)) == ["a.txt"]  # the old folder, untouched
    with atomic_dir(target) as tmp:
        (tmp / "c.txt").write_text("3")
    assert sorted(os.listdir(target)) == ["c.txt"]  # replaced as a whole
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # no temporary siblings left


@pytest.mark.parametrize(
    "x, kwargs, expected",
    [
        (None, {}, ""),
        (float("nan"), {}, ""),
        (np.float32("nan"), {}, ""),
        (math.inf, {}, "inf"),
        (0.0, {}, "0"),
        (0.12345, {}, "0.123"),
        (1234.5, {}, "1.23e+03"),
        (12345.0, {}, "1.23e+04"),
        (1.5e-7, {}, "1.50e-07"),
        (0.575, {"fixed": True}, "0.575"),
        (0.5, {"digits": 2, "fixed": True}, "0.50"),
        (3, {}, "3"),
        (np.int64(7), {}, "7"),
        (True, {}, "True"),
        ("L3H7", {}, "L3H7"),
        (np.float64(2.0), {}, "2"),
    ],
)
def test_fmt(x, kwargs, expected):
    assert fmt(x, **kwargs) == expected


def test_md_table_formats_escapes_and_handles_empty():
    df = pd.DataFrame({"check": ["a|b", "c"], "value": [1.5e-7, 0.25], "n": [3, 4]})
    text = md_table(df)
    assert text.splitlines() == [
        "| check | value | n |",
        "|---|---|---|",
        "| a\\|b | 1.50e-07 | 3 |",
        "| c | 0.25 | 4 |",
    ]
    assert md_table(df, columns=["n", "check"]).splitlines()[2] == "| 3 | a\\|b |"
    assert md_table(df.iloc[:0]) == "_(none)_\n"
    assert md_table(df.iloc[:0], empty="(none)") == "(none)\n"


# ------------------------------------------------------------------------------------------------
# Output sets: a command's files committed as a whole, one writer per folder, --out checked first


def _tree(root):
    """{relative path: bytes} of every file under root (hidden ones, the manifest included), but
    not a run's staging or backup folder (see _no_staging)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith((".interp-new.", ".interp-old.")) for part in p.parts)
    }


def _no_staging(root):
    """No staging or backup folder left anywhere under root."""
    left = [p for p in root.rglob(".interp-*") if p.is_dir()]
    assert not left, left


@pytest.fixture
def previous(tmp_path):
    """out/ as a probe run left it, next to other commands' folders and a user's note."""
    from interp.io import output_dir

    out = tmp_path / "out"
    with output_dir(out, owned=OWNED, command="interp probe") as tmp:  # a toolkit run: its manifest
        (tmp / "heads.csv").write_text("seed 0 table")
        (tmp / "report.md").write_text("Seed 0 report")
        (tmp / "pattern_anaphora.png").write_bytes(b"old png")
    (out / "invariance").mkdir(parents=True)
    (out / "validation").mkdir()
    (out / "invariance" / "invariance.csv").write_text("inv")
    (out / "validation" / "validation.csv").write_text("val")
    (out / "notes.txt").write_text("mine")
    return out


OWNED = ["heads.csv", "report.md", "pattern_*.png"]


def test_output_dir_commits_the_owned_set_and_leaves_the_rest(previous):
    from interp.io import output_dir

    before = _tree(previous)
    with output_dir(previous, owned=OWNED, command="interp probe") as tmp:
        assert tmp.parent == previous and tmp.name.startswith(".")  # hidden, inside: on its file system
        (tmp / "heads.csv").write_text("seed 1 table")
        (tmp / "report.md").write_text("Seed 1 report")
        (tmp / "pattern_local.png").write_bytes(b"new png")
        assert _tree(previous) == before  # nothing visible before the block ends
    after = _tree(previous)
    assert after["heads.csv"] == b"seed 1 table" and after["report.md"] == b"Seed 1 report"
    assert "pattern_anaphora.png" not in after  # the old set's member is gone with its set
    assert after["pattern_local.png"] == b"new png"
    for other in ("invariance/invariance.csv", "validation/validation.csv", "notes.txt"):
        assert after[other] == before[other], other  # other commands' files are not this one's
    assert sorted(os.listdir(previous.parent)) == ["out"]  # no lock left
    _no_staging(previous)


def test_output_dir_keeps_the_previous_set_on_an_interrupt(previous):
    from interp.io import output_dir

    before = _tree(previous)
    with pytest.raises(KeyboardInterrupt):
        with output_dir(previous, owned=OWNED, command="interp probe") as tmp:
            (tmp / "heads.csv").write_text("seed 1 table")
            raise KeyboardInterrupt  # after the table, before the report
    assert _tree(previous) == before
    assert sorted(os.listdir(previous.parent)) == ["out"]
    _no_staging(previous)


def test_output_dir_rolls_back_a_swap_that_fails_half_way(previous, monkeypatch):
    from interp import io

    before = _tree(previous)
    real, calls = os.replace, []

    def flaky(src, dst):
        calls.append((src, dst))
        if str(src).endswith("report.md") and ".interp-new" in str(src):
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(io.os, "replace", flaky)
    with pytest.raises(OSError, match="No space left"):
        with io.output_dir(previous, owned=OWNED, command="interp probe") as tmp:
            (tmp / "heads.csv").write_text("seed 1 table")
            (tmp / "report.md").write_text("Seed 1 report")
    assert any("heads.csv" in str(d) and ".interp-new" not in str(d) for _, d in calls)  # it got that far
    monkeypatch.undo()
    assert _tree(previous) == before
    assert sorted(os.listdir(previous.parent)) == ["out"]
    _no_staging(previous)


def test_output_dir_refuses_files_it_does_not_own(previous):
    from interp.io import output_dir

    before = _tree(previous)
    with pytest.raises(ValueError, match=r"invariance\.csv.*not among the files it owns"):
        with output_dir(previous, owned=OWNED, command="interp probe") as tmp:
            (tmp / "heads.csv").write_text("x")
            (tmp / "invariance.csv").write_text("x")
    assert _tree(previous) == before


def test_output_dir_creates_a_new_folder(tmp_path):
    from interp.io import output_dir

    with output_dir(tmp_path / "a" / "b", owned=["x.csv"]) as tmp:
        (tmp / "x.csv").write_text("1")
    assert (tmp_path / "a" / "b" / "x.csv").read_text() == "1"


def test_a_second_writer_of_the_same_folder_is_refused(previous):
    from interp.io import OutputError, output_dir

    with output_dir(previous, owned=OWNED, command="interp probe") as tmp:
        (tmp / "heads.csv").write_text("first")
        with pytest.raises(OutputError, match=rf"{previous} is being written by another run \(pid {os.getpid()}"):
            with output_dir(previous, owned=OWNED, command="interp probe"):
                pass
    assert (previous / "heads.csv").read_text() == "first"
    with output_dir(previous, owned=OWNED, command="interp probe") as tmp:  # free again once the first is done
        (tmp / "heads.csv").write_text("second")
    assert (previous / "heads.csv").read_text() == "second"


def test_a_killed_writer_leaves_no_lock_and_its_leftovers_are_cleared(previous):
    """A run killed with SIGKILL (no cleanup at all) neither blocks the next run nor leaves its
    temporary folder behind once the next run has the folder."""
    import signal
    import subprocess
    import sys
    import textwrap

    from interp.io import output_dir

    code = textwrap.dedent(
        f"""
        import os, sys, time
        from interp.io import output_dir
        with output_dir({str(previous)!r}, owned=["heads.csv"], command="interp probe") as tmp:
            (tmp / "heads.csv").write_text("never committed")
            print("ready", flush=True)
            time.sleep(60)
        """
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=root)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert len(os.listdir(previous.parent)) == 2  # out, its lock
        assert len([n for n in os.listdir(previous) if n.startswith(".interp-new.")]) == 1  # the run's staging
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    with output_dir(previous, owned=OWNED, command="interp probe") as tmp:
        (tmp / "heads.csv").write_text("next run")
    assert (previous / "heads.csv").read_text() == "next run"
    assert sorted(os.listdir(previous.parent)) == ["out"]
    _no_staging(previous)


def _unwritable(tmp_path):
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        return ro / "out"
    if os.path.isdir("/sys"):
        return "/sys/interp-toolkit-test-out"  # sysfs refuses new entries even to root
    pytest.skip("no unwritable place for root here")


@pytest.mark.parametrize("case", ["file", "under_a_file", "name_too_long", "path_too_long", "unwritable"])
def test_check_out_fails_fast_with_one_line(tmp_path, case):
    import time

    from interp.io import OutputError, check_out

    (tmp_path / "f.txt").write_text("x")
    target = {
        "file": tmp_path / "f.txt",
        "under_a_file": tmp_path / "f.txt" / "out",
        "name_too_long": tmp_path / ("x" * 300),
        "path_too_long": tmp_path.joinpath(*["d" * 200] * 25),
        "unwritable": None,
    }[case] or _unwritable(tmp_path)
    expect = {
        "file": "is a file",
        "under_a_file": "is a file",
        "name_too_long": "too long",
        "path_too_long": "too long",
        "unwritable": "not writable|cannot create",
    }[case]
    t0 = time.perf_counter()
    with pytest.raises(OutputError, match=expect) as err:
        check_out(target)
    assert time.perf_counter() - t0 < 1.0
    msg = str(err.value)
    assert "\n" not in msg and str(target)[:40] in msg
    assert sorted(os.listdir(tmp_path)) in (["f.txt"], ["f.txt", "ro"])  # nothing created


def test_check_out_accepts_and_creates_a_folder(tmp_path):
    from interp.io import check_out

    assert check_out(tmp_path / "new" / "out") == tmp_path / "new" / "out"
    assert (tmp_path / "new" / "out").is_dir()
    assert check_out(tmp_path / "new" / "out").is_dir()  # an existing folder is fine


def test_leftover_cleanup_spares_a_neighbours_staging_folder(tmp_path):
    from interp.io import output_dir

    neighbour = tmp_path / ".out.x.abcdefgh.interp-new"  # `out.x`'s run, in progress
    neighbour.mkdir()
    stale = tmp_path / ".out.abcdefgh.interp-new"  # a killed run's, on `out`
    stale.mkdir()
    with output_dir(tmp_path / "out", owned=["a"]) as tmp:
        (tmp / "a").write_text("1")
    assert neighbour.is_dir() and not stale.exists()


# ------------------------------------------------------------------------------------------------
# Second round (issue 24): links, signals at every rename, kills in the commit window, a user's
# files, a mount point, a full disk


def test_a_planted_link_at_the_lock_is_refused_and_its_target_untouched(tmp_path):
    from interp.io import OutputError, output_dir

    victim = tmp_path / "v.txt"
    victim.write_text("mine")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / ".t.interp-lock").symlink_to(victim)
    with pytest.raises(OutputError, match="symbolic link"):
        with output_dir(tmp_path / "d" / "t", owned=["a"]) as tmp:
            (tmp / "a").write_text("1")
    assert victim.read_text() == "mine"
    os.mkfifo(tmp_path / "d" / ".u.interp-lock")  # not a regular file: refused, not waited on
    with pytest.raises(OutputError, match="not a regular file"):
        with output_dir(tmp_path / "d" / "u", owned=["a"]):
            pass


def _new_set(tmp):
    (tmp / "heads.csv").write_text("seed 1 table")
    (tmp / "report.md").write_text("Seed 1 report")
    (tmp / "pattern_local.png").write_bytes(b"new png")


def _of_the_commit(folder, src, dst):
    """Whether a rename is one of the commit's: an entry moved out of `folder` or into it (not a
    file written into the staging or backup folder)."""
    return folder in (os.path.dirname(os.path.realpath(src)), os.path.dirname(os.path.realpath(dst)))


def _renames_of_a_commit(previous):
    """How many os.replace calls a commit of _new_set over `previous` makes (run on a copy)."""
    import shutil

    from interp import io

    copy = previous.parent / "copy"
    shutil.copytree(previous, copy)
    real, n = os.replace, [0]

    def counting(src, dst):
        n[0] += _of_the_commit(str(copy.resolve()), src, dst)
        return real(src, dst)

    io.os.replace = counting
    try:
        with io.output_dir(copy, owned=OWNED, command="interp probe") as tmp:
            _new_set(tmp)
            n[0] = 0  # the writes into the staging folder above are not the commit's
    finally:
        io.os.replace = real
    shutil.rmtree(copy)
    return n[0]


@pytest.mark.parametrize("how", ["raise", "signal"])
def test_a_signal_at_any_rename_of_the_commit_loses_no_file(previous, monkeypatch, how):
    """An interrupt acted on right after any one of the commit's renames (`raise`: as Python
    raises it just after os.replace returns; `signal`: a real SIGINT delivered there) leaves the
    whole previous set or the whole new one, never a folder missing a file."""
    import signal

    from interp import io

    before = _tree(previous)
    total = _renames_of_a_commit(previous)
    assert total >= 6
    real = os.replace
    for k in range(total):
        calls = [0]

        def replace_then_interrupt(src, dst, k=k, calls=calls):
            real(src, dst)
            calls[0] += _of_the_commit(str(previous.resolve()), src, dst)
            if calls[0] == k + 1 and _of_the_commit(str(previous.resolve()), src, dst):  # the k-th
                if how == "raise":
                    raise KeyboardInterrupt
                signal.raise_signal(signal.SIGINT)

        def write(tmp, calls=calls):
            _new_set(tmp)
            calls[0] = 0

        monkeypatch.setattr(io.os, "replace", replace_then_interrupt)
        try:
            with io.output_dir(previous, owned=OWNED, command="interp probe") as tmp:
                write(tmp)
        except KeyboardInterrupt:
            pass
        monkeypatch.undo()
        after = _tree(previous)
        _no_staging(previous)
        if after.get("heads.csv") == b"seed 1 table":  # the signal waited for the commit to end
            assert how == "signal"
            assert after["report.md"] == b"Seed 1 report" and after["pattern_local.png"] == b"new png"
            assert "pattern_anaphora.png" not in after
            # back to the previous set for the next k
            with io.output_dir(previous, owned=OWNED, command="interp probe") as tmp:
                for name in ("heads.csv", "report.md", "pattern_anaphora.png"):
                    (tmp / name).write_bytes(before[name])
            after = {n: b for n, b in _tree(previous).items() if n != ".interp-manifest.json"}
            assert after == {n: b for n, b in before.items() if n != ".interp-manifest.json"}, k
        else:
            assert after == before, f"interrupted after rename {k + 1} of {total}"


def _killed_in_the_commit(previous, k):
    """A child process commits _new_set over `previous` and is killed (os._exit: no cleanup, as
    SIGKILL) right after the commit's k-th rename."""
    from interp import io

    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        try:
            real, calls = os.replace, [0]

            def replace_then_die(src, dst):
                real(src, dst)
                if _of_the_commit(str(previous.resolve()), src, dst):
                    calls[0] += 1
                    if calls[0] == k + 1:
                        os._exit(9)

            io.os.replace = replace_then_die
            with io.output_dir(previous, owned=OWNED, command="interp probe") as tmp:
                _new_set(tmp)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_kill_in_the_commit_window_is_undone_by_the_next_run_even_if_it_fails(previous):
    """After a kill between two renames of a commit, the next run on the folder first restores the
    previous set (or keeps the whole new one, if the commit had finished): even a run that then
    fails on its input leaves a complete set, not a folder without heads.csv."""
    from interp import io

    before = _tree(previous)
    total = _renames_of_a_commit(previous)
    for k in range(total):
        assert _killed_in_the_commit(previous, k) == 9
        with pytest.raises(ValueError, match="bad input"):
            with io.output_dir(previous, owned=OWNED, command="interp probe"):
                raise ValueError("bad input")
        after = _tree(previous)
        _no_staging(previous)
        if k + 1 < total:
            assert after == before, f"killed after rename {k + 1} of {total}"
        else:  # the last rename (the manifest) done: the new set is whole
            assert after["heads.csv"] == b"seed 1 table" and after["pattern_local.png"] == b"new png"
            assert "pattern_anaphora.png" not in after
            return
    pytest.fail("the commit never finished")


def test_a_users_file_matching_a_pattern_is_never_removed(previous):
    from interp.io import output_dir

    (previous / "pattern_my_plot.png").write_bytes(b"user's plot")
    with output_dir(previous, owned=OWNED, command="interp probe") as tmp:
        (tmp / "heads.csv").write_text("seed 1 table")
    after = _tree(previous)
    assert after["pattern_my_plot.png"] == b"user's plot"
    assert "pattern_anaphora.png" not in after and "report.md" not in after  # the previous set's


def test_a_folder_no_toolkit_run_wrote_is_refused_unless_forced(tmp_path):
    from interp.io import OutputError, output_dir

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("my own report")
    (mine / "notes.txt").write_text("notes")
    ran = []
    with pytest.raises(OutputError, match=r"mine holds report\.md.*no toolkit run recorded.*--force"):
        with output_dir(mine, owned=OWNED, command="interp probe"):
            ran.append(1)  # refused before the work
    assert not ran and (mine / "report.md").read_text() == "my own report"
    with output_dir(mine, owned=OWNED, command="interp probe", force=True) as tmp:
        (tmp / "heads.csv").write_text("t")
    assert not (mine / "report.md").exists() and (mine / "notes.txt").read_text() == "notes"
    # a folder holding only other things (another command's folder, notes) needs no force
    other = tmp_path / "other"
    (other / "invariance").mkdir(parents=True)
    (other / "notes.txt").write_text("notes")
    with output_dir(other, owned=OWNED) as tmp:
        (tmp / "heads.csv").write_text("t")
    assert (other / "heads.csv").read_text() == "t" and (other / "notes.txt").read_text() == "notes"


def test_a_users_file_of_a_name_we_write_is_refused_at_the_commit(previous):
    from interp.io import OutputError, output_dir

    (previous / "pattern_syntax.png").write_bytes(b"user's")  # matches the pattern, not recorded
    before = _tree(previous)
    with pytest.raises(OutputError, match="pattern_syntax.png"):
        with output_dir(previous, owned=OWNED, command="interp probe") as tmp:
            (tmp / "heads.csv").write_text("t")
            (tmp / "pattern_syntax.png").write_bytes(b"ours")
    assert _tree(previous) == before


def _as_a_mount_point(monkeypatch, root):
    """os.replace as if `root` were a mount point: a rename across its boundary fails with EXDEV."""
    import errno

    from interp import io

    real = os.replace

    def inside(p):
        p = os.path.realpath(p)
        return p == str(root) or p.startswith(str(root) + os.sep)

    def replace(src, dst):
        if inside(src) != inside(dst):
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src))
        return real(src, dst)

    monkeypatch.setattr(io.os, "replace", replace)


def test_an_out_on_a_mount_point_commits(previous, monkeypatch):
    from interp.io import output_dir

    _as_a_mount_point(monkeypatch, previous.resolve())
    with output_dir(previous, owned=OWNED, command="interp probe") as tmp:
        (tmp / "heads.csv").write_text("seed 1 table")
    assert (previous / "heads.csv").read_text() == "seed 1 table"


def test_a_dangling_link_out_is_named_as_one(tmp_path):
    from interp.io import OutputError, check_out

    (tmp_path / "out").symlink_to(tmp_path / "gone")
    with pytest.raises(OutputError, match=r"symbolic link to .*gone, which does not exist"):
        check_out(tmp_path / "out", "--out")


def test_a_full_disk_names_the_file(tmp_path):
    import errno

    from interp.io import atomic_save

    def full(tmp):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match=r"No space left on device \(writing .*model\.safetensors\)"):
        atomic_save(tmp_path / "model.safetensors", full)
    assert os.listdir(tmp_path) == []


def test_files_are_written_with_the_umask_like_any_open(tmp_path):
    from safetensors.torch import save_file

    from interp.io import atomic_save, atomic_write

    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "a.txt", "x")
        import torch

        atomic_save(tmp_path / "model.safetensors", lambda t: save_file({"w": torch.zeros(2)}, str(t)))
    finally:
        os.umask(old)
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in tmp_path.iterdir()} == {
        "a.txt": "0o644",
        "model.safetensors": "0o644",
    }


def test_write_set_inside_an_open_set_writes_there_and_the_outer_set_commits(tmp_path):
    from interp.io import output_dir, write_set

    out = tmp_path / "out"
    with output_dir(out, ["a.csv", "b.md"], command="outer") as tmp:
        assert write_set(tmp, ["a.csv"], lambda d: (d / "a.csv").write_text("x\n")) == tmp
        assert not (out / "a.csv").exists()  # not before the outer set commits
        (tmp / "b.md").write_text("y\n")
        with pytest.raises(ValueError, match=r"\['c.csv'\], not among"):
            write_set(tmp, ["c.csv"], lambda d: None)
    assert (out / "a.csv").read_text() == "x\n" and (out / "b.md").read_text() == "y\n"
    # alone, it is an output set of its own
    write_set(tmp_path / "solo", ["a.csv"], lambda d: (d / "a.csv").write_text("z\n"))
    assert (tmp_path / "solo" / "a.csv").read_text() == "z\n"
    with pytest.raises(ValueError, match="not among the files it owns"):
        write_set(tmp_path / "solo", ["a.csv"], lambda d: (d / "x.txt").write_text("z\n"))


# ------------------------------------------------------------------------------------------------
# Issue 41: a planted or damaged journal, another command's files, a failed run's new folder


def _plant_journal(out, journal, backup=None):
    """A `.interp-old.*` backup folder holding ``journal`` (as the commit writes it), and ``backup``'s files."""
    import json

    old = out / ".interp-old.planted"
    old.mkdir()
    (old / ".interp-journal.json").write_text(journal if isinstance(journal, str) else json.dumps(journal))
    for name, data in (backup or {}).items():
        (old / name).write_bytes(data)
    return old


@pytest.mark.parametrize(
    "journal",
    [
        {"commit": "x", "new_dir": ".interp-new.x", "old": [], "new": ["thesis.txt"]},  # a name no manifest records
        {"commit": "x", "new_dir": ".interp-new.x", "old": [], "new": "thesis.txt"},  # a string: t, h, e, s, ...
        {"commit": "x", "new_dir": ".interp-new.x", "old": "ab", "new": []},
        {"commit": "x", "new_dir": ".interp-new.x", "old": [], "new": [1, None]},
        {"commit": "x", "new_dir": ["x"], "old": [], "new": []},
        ["thesis.txt"],
    ],
)
def test_a_planted_or_damaged_journal_removes_no_file(previous, journal):
    """A journal naming a user's file, or with strings where lists belong, moves and removes
    nothing: the next run is refused with one line naming the journal, and every file stays."""
    from interp.io import OutputError, output_dir

    for name in ("thesis.txt", "t", "h", "e", "s", "a", "b"):
        (previous / name).write_text(f"the user's {name}")
    _plant_journal(previous, journal)
    before = _tree(previous)
    with pytest.raises(OutputError, match=r"commit journal .*\.interp-journal\.json is damaged") as e:
        with output_dir(previous, owned=OWNED, command="interp probe"):
            pass
    assert "\n" not in str(e.value)
    assert _tree(previous) == before


def test_a_planted_backup_never_replaces_a_users_file(previous):
    """A backup folder whose journal says it holds the previous `thesis.txt` does not put its own
    copy over the user's."""
    from interp.io import OutputError, output_dir

    (previous / "thesis.txt").write_text("the user's thesis")
    _plant_journal(
        previous, {"commit": "x", "new_dir": ".interp-new.x", "old": ["thesis.txt"], "new": []}, {"thesis.txt": b"x"}
    )
    with pytest.raises(OutputError, match="would replace a file of that name"):
        with output_dir(previous, owned=OWNED, command="interp probe"):
            pass
    assert (previous / "thesis.txt").read_text() == "the user's thesis"


def test_a_planted_backup_with_its_own_manifest_removes_no_file(previous):
    """A planted backup folder that brings a manifest naming `thesis.txt` along with its journal: the
    backup's manifest is not a record of what the toolkit wrote in the folder (it came with the
    journal), so the user's file stays and the run is refused with one line."""
    import json

    from interp.io import OutputError, output_dir

    (previous / "thesis.txt").write_text("the user's thesis")
    files = {"thesis.txt": "interp probe", "heads.csv": "interp probe"}
    _plant_journal(
        previous,
        {"commit": "x", "new_dir": ".interp-new.x", "old": [], "new": ["thesis.txt"]},
        {".interp-manifest.json": json.dumps({"written_by": "interp", "commit": "y", "files": files}).encode()},
    )
    before = _tree(previous)
    with pytest.raises(OutputError, match=r"damaged \(no manifest records 'thesis.txt'") as e:
        with output_dir(previous, owned=OWNED, command="interp probe"):
            pass
    assert "\n" not in str(e.value)
    assert _tree(previous) == before and (previous / "thesis.txt").read_text() == "the user's thesis"


def test_another_commands_file_of_a_name_we_own_is_refused_unless_forced(previous):
    """`interp circuit --out <a probe folder>`: the manifest records report.md as interp probe's; a
    set of interp circuit owning report.md is refused (one line naming the command and the file)
    before the block, and replaces it with force; a rerun of the same command needs no force."""
    from interp.io import OutputError, output_dir, write_set

    circuit = ["report.md", "nodes.csv"]
    ran = []
    with pytest.raises(OutputError, match=r"report\.md \(written by interp probe\).*interp circuit.*--force") as e:
        with output_dir(previous, owned=circuit, command="interp circuit"):
            ran.append(1)
    assert not ran and "\n" not in str(e.value)
    assert (previous / "report.md").read_text() == "Seed 0 report"
    with pytest.raises(OutputError, match="written by interp probe"):  # the library's writers too
        write_set(previous, circuit, lambda d: (d / "report.md").write_text("circuit"), command="interp circuit")
    write_set(previous, ["heads.csv", "report.md"], lambda d: (d / "report.md").write_text("r"), command="interp probe")
    assert (previous / "report.md").read_text() == "r"  # the same command again: fine
    with output_dir(previous, owned=circuit, command="interp circuit", force=True) as tmp:
        (tmp / "report.md").write_text("circuit report")
    assert (previous / "report.md").read_text() == "circuit report"
    assert (previous / "pattern_anaphora.png").exists()  # the probe's other files stay


def test_a_failed_run_leaves_no_new_empty_out(tmp_path):
    """A folder (and parents) that output_dir created is removed when the block fails before any
    commit; a folder that existed before, or that holds anything, stays."""
    from interp.io import output_dir

    new = tmp_path / "a" / "b" / "out"
    with pytest.raises(ValueError, match="bad input"):
        with output_dir(new, owned=["x.csv"]):
            raise ValueError("bad input")
    assert sorted(os.listdir(tmp_path)) == []
    existing = tmp_path / "existing"
    existing.mkdir()
    with pytest.raises(ValueError, match="bad input"):
        with output_dir(existing, owned=["x.csv"]):
            raise ValueError("bad input")
    assert existing.is_dir() and not os.listdir(existing)
    with pytest.raises(ValueError, match="bad input"):
        with output_dir(tmp_path / "c" / "out", owned=["x.csv"]):
            (tmp_path / "c" / "notes.txt").write_text("written meanwhile")
            raise ValueError("bad input")
    assert sorted(os.listdir(tmp_path)) == ["c", "existing"] and os.listdir(tmp_path / "c") == ["notes.txt"]
