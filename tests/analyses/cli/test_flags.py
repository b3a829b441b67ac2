"""One command line: the flags every ``interp`` subcommand shares, read off the parsers themselves
(one help text and one default rule each), ``--threads`` put back when a command ends, the renamed
flags' aliases, and ``OMP_WAIT_POLICY`` set before torch loads (in a fresh process)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from analyses.cli import SUBCOMMANDS, build_parser, main
from analyses.cli import common as C

ROOT = Path(__file__).resolve().parents[3]
LOADS_A_MODEL = {
    "tour", "probe", "invariance", "validate", "catalogue", "circuit", "agreement", "qk", "sinks", "retrieval",
    "explore",
}  # fmt: skip
NEEDS_A_CAUSAL_LM = {"circuit", "agreement", "qk", "sinks", "retrieval"}
WRITES_NO_FOLDER = {"explore"}
SHARED = ("--model", "--device", "--dtype", "--threads", "--force", "--seed", "--text")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _flag(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    return next((a for a in parser._actions if flag in a.option_strings), None)


def test_every_subcommand_is_listed_in_the_help_and_has_a_parser():
    subs = _subparsers()
    assert list(subs) == list(SUBCOMMANDS)
    assert "positional" in subs
    shown = " ".join(build_parser().format_help().split())
    assert f"one subcommand per analysis ({', '.join(SUBCOMMANDS)})" in shown  # the description's list


def test_every_command_that_loads_a_model_takes_the_model_flags_with_one_help_and_one_default_rule():
    subs = _subparsers()
    with_model = {name for name, p in subs.items() if _flag(p, "--model") is not None}
    assert with_model == LOADS_A_MODEL
    helps: dict[str, set] = {flag: set() for flag in SHARED}
    for name, p in subs.items():
        for flag in SHARED:
            action = _flag(p, flag)
            if action is not None and action.help != argparse.SUPPRESS:
                helps[flag].add(action.help)
        if name not in LOADS_A_MODEL:
            assert all(_flag(p, f) is None for f in ("--device", "--dtype", "--threads")), name
            continue
        for flag in ("--device", "--dtype", "--threads"):
            assert _flag(p, flag) is not None, f"interp {name} lacks {flag}"
        model = _flag(p, "--model")
        assert not model.required, f"interp {name} requires --model"
        assert model.default == ("smollm2" if name in NEEDS_A_CAUSAL_LM else "minilm"), name
        assert _flag(p, "--device").default == "cpu" and _flag(p, "--dtype").default == "float32"
        assert _flag(p, "--threads").default is None
    for flag, texts in helps.items():
        assert len(texts) == 1, f"{flag} has {len(texts)} help texts: {texts}"
    assert "gemma3" in next(iter(helps["--model"])) and "hub id" in next(iter(helps["--model"]))


def test_force_where_a_folder_is_written_and_one_seed():
    for name, p in _subparsers().items():
        assert (_flag(p, "--force") is not None) == (name not in WRITES_NO_FOLDER), name
        seed = _flag(p, "--seed")
        if seed is not None:
            assert seed.default == 0 and seed.help == C.SEED_HELP, name
        visible = {s for a in p._actions if a.help != argparse.SUPPRESS for s in a.option_strings}
        assert "--overwrite" not in visible, name
        if "--text" in visible:  # a string wherever it is shown; a file is --text-file
            assert _flag(p, "--text").help == C.TEXT_HELP, name


def test_renamed_flags_keep_a_hidden_alias_that_warns(capsys):
    parser = build_parser()
    args = parser.parse_args(["train", "--config", "c.toml", "--out", "o", "--overwrite"])
    assert args.force is True
    assert "--overwrite is deprecated; use --force" in capsys.readouterr().err
    assert parser.parse_args(["train", "--config", "c.toml", "--out", "o"]).force is False
    args = parser.parse_args(["probe", "--out", "o", "--text", "mine.txt"])
    assert args.text == "mine.txt"
    assert "--text is deprecated; use --text-file" in capsys.readouterr().err
    args = parser.parse_args(["probe", "--out", "o", "--text-file", "mine.txt"])
    assert args.text == "mine.txt" and capsys.readouterr().err == ""


# ---- --threads --------------------------------------------------------------------------------------


def _other_count() -> int:
    return 2 if torch.get_num_threads() == 1 else 1


def test_threads_sets_the_count_for_the_block_and_restores_it_however_it_ends():
    before, n = torch.get_num_threads(), _other_count()
    with C.threads(n):
        assert torch.get_num_threads() == n
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError, match="boom"), C.threads(n):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before
    with C.threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="--threads must be a positive"), C.threads(0):
        pass


_REQUIRED = {"--out": "OUT", "--task": "ioi", "--config": "c.toml", "--heads": "L0H0"}


@pytest.mark.parametrize("command", sorted(LOADS_A_MODEL))
@pytest.mark.parametrize("fails", [False, True])
def test_every_command_runs_with_its_threads_and_puts_the_count_back(command, fails, tmp_path, monkeypatch):
    import importlib

    module = importlib.import_module(SUBCOMMANDS[command][0])
    seen = []

    def fake_run(args):
        seen.append(torch.get_num_threads())
        if fails:
            raise ValueError("a user's error")
        return 0

    monkeypatch.setattr(module, "run", fake_run)
    parser = _subparsers()[command]
    argv = [command, "--threads", str(_other_count())]
    for a in parser._actions:
        if a.required:
            argv += [a.option_strings[0], str(tmp_path / "o") if a.dest == "out" else _REQUIRED[a.option_strings[0]]]
    before = torch.get_num_threads()
    assert main(argv) == (2 if fails else 0)
    assert seen == [_other_count()] and torch.get_num_threads() == before


# ---- OMP_WAIT_POLICY ----------------------------------------------------------------------------------

# a sitecustomize that records OMP_WAIT_POLICY as the process sees it when torch is first imported
_RECORDER = textwrap.dedent(
    """
    import os, sys
    class _Recorder:
        def find_spec(self, name, path=None, target=None):
            if name == "torch":
                sys.meta_path.remove(self)
                with open(os.environ["RECORD_OMP"], "a") as f:
                    f.write(f"{os.environ.get('OMP_WAIT_POLICY')}\\n")
                with open(os.environ["RECORD_OMP"]) as f:
                    seen = len(f.read().split())
                if seen >= int(os.environ.get("RECORD_STOP", "0") or 10**6):  # seen: no need to load it
                    raise ImportError("torch import stopped by the test")
            return None
    sys.meta_path.insert(0, _Recorder())
    """
)


def _run_recorded(
    tmp_path, argv: list[str], user_value: str | None, stop: int = 0
) -> tuple[subprocess.CompletedProcess, list[str]]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_RECORDER)
    record = tmp_path / "record.txt"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.update(PYTHONPATH=f"{site}{os.pathsep}{ROOT}", RECORD_OMP=str(record))
    if stop:  # the torch import to stop at (1: the first)
        env["RECORD_STOP"] = str(stop)
    if user_value is not None:
        env["OMP_WAIT_POLICY"] = user_value
    out = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    return out, record.read_text().split() if record.exists() else []


@pytest.mark.parametrize("user_value, seen", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_interp_sets_passive_openmp_before_torch_loads_and_keeps_a_users_value(tmp_path, user_value, seen):
    code = "import sys\nfrom analyses.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    argv = ["-c", code, "tour", "--model", str(tmp_path / "no_such_model"), "--out", str(tmp_path / "t")]
    out, record = _run_recorded(tmp_path, argv, user_value, stop=1)
    assert "torch import stopped by the test" in out.stderr, out.stderr  # the command got as far as torch
    assert record == [seen]


def test_python_m_positional_runs_the_study_with_passive_openmp(tmp_path):
    out, record = _run_recorded(tmp_path, ["-m", "analyses.positional", "--budget", "nope"], None, stop=2)
    # the package imports torch before __main__ runs; __main__ then starts again with the variable set,
    # and the new process sees it when it imports torch (stopped there: the rest is interp positional's)
    assert record == ["None", "PASSIVE"], (record, out.stderr)
    assert "torch import stopped by the test" in out.stderr, out.stderr
