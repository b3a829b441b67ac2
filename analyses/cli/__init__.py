"""The ``interp`` command line: one subcommand per analysis, each parsing its arguments and calling
the library. ``SUBCOMMANDS`` lists them (``interp --help`` shows the list, made from it).

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and ``run(args)
-> int``; modules are imported only when used. The flags they share, with one help text and one
default rule each, come from ``analyses.cli.common``. Every command runs with
``OMP_WAIT_POLICY=PASSIVE`` unless the user set it (``common.passive_openmp``, before torch is
imported) and, given ``--threads``, with that many torch threads, the previous count put back when it
ends (``common.threads``). The work itself lives outside ``cli/``: the worker launcher in
``analyses.workers``, the training config reader in ``models.training``.

Errors a user can fix (a bad argument, a missing or malformed file, a model that does not exist, an
unusable ``--out``: ``ValueError``, ``OSError`` and ``interp.io.OutputError``, which the library
raises with a one-line message naming the file) are printed as ``interp <command>: message`` with
exit status 2; anything else is a bug and keeps its traceback (``INTERP_TRACEBACK=1`` shows the
traceback for every error). An interrupt (Ctrl-C, or SIGTERM) exits with status 130 (143) after the
command's cleanup: its output folder is left as it was before the run, or, when the signal came
after an output set was committed, the message names the folders that hold the new set. A signal that
comes while the command line loads is held (``_hold_signals``) until the command runs, then handled
there; a command with ``OWNS_SIGNALS`` (explore) releases them itself, once its own handler is in place."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading

from analyses.cli.common import Terminated
from analyses.cli.common import passive_openmp as _passive_openmp
from analyses.cli.common import threads as _threads

__all__ = ["Terminated", "build_parser", "main"]

SUBCOMMANDS = {
    "tour": ("analyses.cli.tour", "the model, its hooks and shapes, one attention pattern as a PNG"),
    "probe": ("analyses.cli.probe", "classify every head (head-probing report)"),
    "invariance": ("analyses.cli.invariance", "permutation, rotation, relative-position and sqrt(d) checks"),
    "validate": ("analyses.cli.validate", "causal validation of head labels by ablation"),
    "catalogue": ("analyses.cli.catalogue", "one verdict per head and task: its pattern joined with patching"),
    "circuit": ("analyses.cli.circuit", "which heads and edges carry a task: EAP / EAP-IG, faithfulness (CPR, CMD)"),
    "agreement": ("analyses.cli.agreement", "does what a head attends to rank heads as exact patching does?"),
    "qk": ("analyses.cli.qk", "why a head attends where it does: its score split into component x component terms"),
    "train": ("analyses.cli.train", "train the toolkit's transformer from a config file"),
    "summary": ("analyses.cli.summary", "one page over the main job's outputs: comparison, invariances, validation"),
    "sinks": ("analyses.cli.sinks", "the attention sink and previous-token / induction heads at 64 to 4,096 tokens"),
    "explore": ("analyses.cli.explore", "a local web page that runs the model on the text you type"),
    "retrieval": ("analyses.cli.retrieval", "retrieval heads at long context: needle-in-a-haystack, scores, masking"),
    "positional": ("analyses.cli.positional", "the positional-encoding study: synthetic tasks and natural text"),
    "parity": ("analyses.cli.parity", "the parity matrix: every architecture vs the installed Hugging Face, bitwise"),
}
DESCRIPTION = (
    "The interp command line: one subcommand per analysis ("
    + ", ".join(SUBCOMMANDS)
    + "), each parsing its arguments and calling the library."
)


def _on_sigterm(signum, frame):
    raise Terminated


HELD = (signal.SIGINT, signal.SIGTERM)


def _hold_signals():
    """Block SIGINT and SIGTERM (main thread, POSIX): one that comes while the command line loads
    (Python imports the commands) is not lost and raises no traceback there; it waits, pending, until
    the command can answer it. Returns the mask to put back (None: nothing was held)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, HELD)


def _release_signals(mask) -> None:
    """Put back the mask ``_hold_signals`` returned: a signal held meanwhile is handled now."""
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _user_errors() -> tuple[type[BaseException], ...]:
    from interp.io import OutputError  # light: no torch, no pandas

    return (ValueError, OSError, OutputError)


def _what_was_written(before: int) -> str:
    """After a signal: which output sets this command had committed (complete) before it came."""
    from interp.io import committed_sets

    done = committed_sets()[before:]
    if not done:
        return "its output folder was left as it was"
    where = ", ".join(dict.fromkeys(str(p) for p in done))
    return f"it had written a complete new output set to {where} before the signal came"


def _one_line(e: BaseException) -> str:
    return " ".join((str(e) or type(e).__name__).split())


def build_parser() -> argparse.ArgumentParser:
    """``interp``'s parser: one subparser per entry of ``SUBCOMMANDS`` (a module that is missing from
    this build gives a subcommand that says so)."""
    parser = argparse.ArgumentParser(prog="interp", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            p.set_defaults(_missing=module)
            continue
        mod.add_arguments(p)
        # a command that answers SIGINT/SIGTERM itself (OWNS_SIGNALS) is run with them still held, and
        # releases them once its handlers are in place (interp explore: "stopped" however early)
        p.set_defaults(_run=mod.run, _owns_signals=getattr(mod, "OWNS_SIGNALS", False))
    return parser


def main(argv=None) -> int:
    held = _hold_signals()  # first: a Ctrl-C from here on reaches the command, never a half-loaded parser
    try:
        return _main(argv, held)
    finally:
        _release_signals(held)


def _main(argv, held) -> int:
    _passive_openmp()  # before torch: OpenMP reads it once, when torch loads
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_missing", None):
        parser.error(f"'{args.command}' is not available in this build ({args._missing} is missing)")
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    from interp.io import committed_sets  # light: no torch, no pandas

    before = len(committed_sets())
    try:
        if not args._owns_signals:
            _release_signals(held)  # a signal held while the command line loaded: interrupted, here
        with _threads(getattr(args, "threads", None)):
            return int(args._run(args) or 0)
    except KeyboardInterrupt:
        sys.stderr.write(f"interp {args.command}: interrupted; {_what_was_written(before)}\n")
        return 130
    except Terminated:
        sys.stderr.write(f"interp {args.command}: terminated; {_what_was_written(before)}\n")
        return 143
    except _user_errors() as e:
        if os.environ.get("INTERP_TRACEBACK"):
            raise
        sys.stderr.write(f"interp {args.command}: {_one_line(e)}\n")
        return 2
    finally:
        if main_thread and previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
