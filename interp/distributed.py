"""Sharded runs on ``torch.distributed``: one group of N worker processes, work split by item, results
merged exactly.

Two ways in, one code path:

* ``torchrun --nproc-per-node N --no-python interp probe ...``: the environment holds ``RANK`` and
  ``WORLD_SIZE``; ``launch`` joins that group (``env://``) and runs the work in this process.
* ``interp probe --workers N``: ``launch`` spawns N processes (``torch.multiprocessing``, start
  method "spawn") on ``127.0.0.1`` and a free port; rank 0's result comes back to the caller.

gloo on CPU, nccl when the device is CUDA (with a gloo side group for the control messages). The
group's timeout is ``timeout`` seconds (default ``DEFAULT_TIMEOUT``, not gloo's 30 minutes): a
worker that raises or exits stops the run at once (``WorkerError`` names it); one that hangs stops
it after ``timeout``.

The rules the analyses follow (``World``):

* **Shards are items, not workers**: item ``i`` (a batch of sentences, a head to ablate) belongs to
  rank ``i % N`` (``World.shard``), and everything random is seeded per item, so what an item
  contributes does not depend on N.
* **Merging is in rank order** (``World.sum_``): rank 0 adds rank 1's partial sums, then rank 2's,
  ..., and broadcasts the total, so every rank returns the same numbers.
* **Only rank 0 writes** outputs and shows progress bars (``World.is_main``).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import os
import pickle
import re
import secrets
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

__all__ = ["DEFAULT_TIMEOUT", "World", "WorkerError", "SINGLE", "current", "from_torchrun", "is_main_process", "launch"]

DEFAULT_TIMEOUT = 300.0  # seconds a collective waits for a silent worker (gloo's default: 1800)


class WorkerError(RuntimeError):
    """A worker of a sharded run failed; ``rank`` names it (None: not known)."""

    def __init__(self, rank: int | None, size: int, message: str) -> None:
        who = f"worker {rank} of {size}" if rank is not None else f"a worker of {size}"
        super().__init__(f"{who} failed: {message}; the run was stopped and nothing was written")
        self.rank, self.size, self.detail = rank, size, message


@dataclass(frozen=True)
class World:
    """This process's place in the group. ``World()`` (``SINGLE``) is one process, no group."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def device(self) -> torch.device:
        """Where collectives run: CUDA for nccl (this rank's local GPU), else the CPU."""
        return torch.device("cuda", self.local_rank) if self.backend == "nccl" else torch.device("cpu")

    def shard(self, n_items: int) -> range:
        """The items of ``range(n_items)`` this rank owns: ``rank, rank + size, ...`` (round robin, so
        items sorted by cost, e.g. sentences by length, spread evenly)."""
        return range(self.rank, n_items, self.size)

    def owns(self, item: int) -> bool:
        return item % self.size == self.rank

    def sum_(self, tensors: Sequence[Tensor], add: Callable[[list[Tensor], list[Tensor]], None] | None = None) -> None:
        """In place on every rank: each tensor becomes the sum over ranks, added in rank order
        (rank 0's, then + rank 1's, + rank 2's, ...), the same bits on every rank. One message per
        rank to rank 0 and one broadcast back. ``add(acc, other)``, if given, replaces ``acc[i] +=
        other[i]`` (e.g. compensated sums, ``interp.reducers``); both lists are float64 views."""
        if self.size == 1 or not tensors:
            return
        import torch.distributed as dist

        sizes = [t.numel() for t in tensors]
        flat = torch.cat([t.detach().reshape(-1).to(torch.float64) for t in tensors]).to(self.device)
        with _named_failures(self, "merging the partial sums"):
            if self.rank == 0:
                other = torch.empty_like(flat)
                for src in range(1, self.size):
                    dist.recv(other, src=src)
                    if add is None:
                        flat += other
                    else:
                        add(list(flat.split(sizes)), list(other.split(sizes)))
            else:
                dist.send(flat, dst=0)
            dist.broadcast(flat, src=0)
        for t, part in zip(tensors, flat.cpu().split(sizes)):
            t.copy_(part.reshape(t.shape).to(t.dtype))

    def gather(self, obj: Any) -> list:
        """Every rank's ``obj`` (picklable), in rank order, on every rank."""
        if self.size == 1:
            return [obj]
        import torch.distributed as dist

        out: list = [None] * self.size
        with _named_failures(self, "exchanging results"):
            dist.all_gather_object(out, obj, group=_control_group())
        return out

    def wait_all(self, what: str) -> None:
        """A barrier that names the workers that do not reach it (gloo's monitored barrier on rank 0)."""
        if self.size == 1:
            return
        import torch.distributed as dist

        with _named_failures(self, what):
            dist.monitored_barrier(group=_control_group(), timeout=_CONTROL.get("timeout"), wait_all_ranks=True)


SINGLE = World()
_CONTROL: dict = {}


def _control_group():
    return _CONTROL.get("group")


@contextmanager
def _named_failures(world: World, what: str) -> Iterator[None]:
    """Turns an error inside a collective into a ``WorkerError`` that names the missing worker where
    gloo says which one (its monitored barrier does), else says which step failed on this rank."""
    try:
        yield
    except (RuntimeError, OSError) as exc:
        if isinstance(exc, WorkerError):
            raise
        text = " ".join(str(exc).split())
        m = re.search(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier", text)
        if m:
            ranks = [int(r) for r in re.findall(r"\d+", m.group(1))]
            rank = ranks[0] if len(ranks) == 1 else None
            timeout = _CONTROL.get("timeout")
            limit = f"{timeout.total_seconds():g} s" if timeout is not None else "the"
            raise WorkerError(
                rank, world.size, f"did not reach {what} (it stopped, or hung past the {limit} timeout)"
            ) from exc
        raise WorkerError(
            None, world.size, f"worker {world.rank} lost the group while {what}; another worker stopped ({text[:300]})"
        ) from exc


def current() -> World:
    """The ``World`` of this process: the initialised default group, else ``SINGLE``."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return SINGLE
    return World(
        rank=dist.get_rank(),
        size=dist.get_world_size(),
        local_rank=int(os.environ.get("LOCAL_RANK", dist.get_rank())),
        backend=str(dist.get_backend()),
    )


def from_torchrun() -> bool:
    """Whether this process was started by ``torchrun`` (or any launcher that sets RANK/WORLD_SIZE)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def is_main_process() -> bool:
    """True unless this is a non-zero rank of a torchrun group (the one process that writes)."""
    return int(os.environ.get("RANK", "0")) == 0 if from_torchrun() else True


def _backend(device: str | torch.device | None) -> str:
    dev = torch.device(device) if device is not None else torch.device("cpu")
    return "nccl" if dev.type == "cuda" else "gloo"


def _init(rank: int, size: int, backend: str, timeout: float) -> World:
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", rank))
    if backend == "nccl":
        torch.cuda.set_device(local)
    dist.init_process_group(backend, rank=rank, world_size=size, timeout=datetime.timedelta(seconds=timeout))
    # control messages (barriers naming the missing worker, pickled objects) go over gloo, also
    # when the data goes over nccl
    group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout)) if backend == "nccl" else None
    _CONTROL.update(group=group, timeout=datetime.timedelta(seconds=timeout))
    return World(rank=rank, size=size, local_rank=local, backend=backend)


def _finish() -> None:
    import torch.distributed as dist

    _CONTROL.clear()
    if dist.is_initialized():
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


RESULT_FILE = "result.bin"  # rank 0's result in the run's private folder: HMAC-SHA256 tag, then the pickle


def _write_result(folder: str, key: bytes, out: Any) -> None:
    """Rank 0's result for the parent, signed with the run's key (which never touches the disk).
    Written into the existing folder only (never recreated: a parent that stopped removed it)."""
    payload = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
    tag = hmac.new(key, payload, hashlib.sha256).digest()
    part = os.path.join(folder, RESULT_FILE + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(tag + payload)
    os.replace(part, os.path.join(folder, RESULT_FILE))


def _read_result(folder: str, key: bytes, size: int) -> Any:
    """The result rank 0 wrote, unpickled only once its tag proves that a worker of this run (the
    holder of the key) wrote these very bytes: a file another process planted there is refused
    before a byte of it is unpickled."""
    path = os.path.join(folder, RESULT_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        raise WorkerError(0, size, f"left no result ({e.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    tag, payload = data[:32], data[32:]
    if not hmac.compare_digest(tag, hmac.new(key, payload, hashlib.sha256).digest()):
        raise WorkerError(0, size, f"its result {path} was not written by this run's worker (bad signature)")
    return pickle.loads(payload)  # authenticated: bytes our own worker pickled


def _entry(
    rank: int,
    fn: Callable,
    args: tuple,
    size: int,
    port: int,
    backend: str,
    timeout: float,
    threads: int,
    folder: str,
    key: bytes,
) -> None:
    """One spawned worker: join the group, run ``fn(world, *args)``, rank 0 writes the signed result.
    On an error, leave a note for the parent (``error.<rank>``): whether this worker failed on its
    own or only lost the group because another one stopped."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank)
    )
    torch.set_num_threads(threads)
    try:
        world = _init(rank, size, backend, timeout)
        out = fn(world, *args)
        if rank == 0:
            _write_result(folder, key, out)
    except BaseException as e:
        victim = isinstance(e, WorkerError)
        blames = e.rank if victim and e.rank != rank else None
        line = e.detail if victim else f"{type(e).__name__}: {e}"
        note = {"victim": victim, "blames": blames, "line": " ".join(line.split())}
        Path(folder, f"error.{rank}").write_text(json.dumps(note))
        if victim:  # let the worker that stopped first be the one torch.multiprocessing reports
            time.sleep(1.0)
        raise
    finally:
        _finish()


def _spawn_error(exc: BaseException, folder: str, size: int) -> WorkerError:
    """The worker to blame: the lowest rank that failed on its own (its note), else the one that
    exited without a note (killed, os._exit), else the one torch.multiprocessing reports."""
    notes = {}
    for rank in range(size):
        path = Path(folder, f"error.{rank}")
        if path.exists():
            notes[rank] = json.loads(path.read_text())
    causes = sorted(r for r, note in notes.items() if not note["victim"])
    if causes:
        return WorkerError(causes[0], size, notes[causes[0]]["line"])
    rank = getattr(exc, "error_index", None)
    exit_code = getattr(exc, "exit_code", None)
    if rank is not None and rank not in notes:
        how = f"exited with code {exit_code}" if exit_code is not None else "stopped without an error message"
        return WorkerError(rank, size, how)
    blamed = [(note["blames"], note["line"]) for note in notes.values() if note["blames"] is not None]
    if blamed:  # a monitored barrier named the worker that did not arrive
        return WorkerError(blamed[0][0], size, blamed[0][1])
    silent = [r for r in range(size) if r not in notes]
    if len(silent) == 1:
        return WorkerError(silent[0], size, "stopped without an error message (exited or was killed)")
    line = notes[rank]["line"] if rank in notes else " ".join(str(exc).split())[-300:]
    return WorkerError(None, size, line)


def launch(
    fn: Callable[..., Any],
    *args: Any,
    workers: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    device: str | torch.device | None = None,
) -> Any:
    """Run ``fn(world, *args)`` on every worker and return rank 0's result.

    Under torchrun (RANK and WORLD_SIZE set) this process joins the group and runs its own share;
    ``workers``, when given, must equal WORLD_SIZE; a non-zero rank returns its own result (check
    ``World.is_main`` or ``is_main_process()`` before writing). Otherwise ``workers`` processes are
    spawned on 127.0.0.1 (``workers`` = 1 or None: ``fn(SINGLE, *args)`` here, no group). ``fn`` and
    ``args`` must be picklable (a module-level function). Each spawned worker gets this process's
    thread count divided by ``workers``. A worker that raises or exits ends the run with a
    ``WorkerError`` naming it; one that hangs, after ``timeout`` seconds."""
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():  # a group the caller made: use it as it is
        world = current()
        if workers is not None and workers != world.size:
            raise ValueError(f"workers={workers}, but this process is in a group of {world.size}")
        return fn(world, *args)
    if from_torchrun():
        size, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
        if workers is not None and workers != size:
            raise ValueError(
                f"--workers {workers} but torchrun started {size} processes (WORLD_SIZE={size}); "
                f"pass --workers {size} or leave it out"
            )
        world = _init(rank, size, _backend(device), timeout)
        try:
            return fn(world, *args)
        finally:
            _finish()
    if workers is None or workers == 1:
        return fn(SINGLE, *args)
    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import ProcessException

    threads = max(1, torch.get_num_threads() // workers)
    key = secrets.token_bytes(32)  # goes to the workers through spawn's pipe, never to a file
    # the folder is private (mkdtemp: 0700) and removed however the parent stops: the workers are
    # stopped first, so none writes into it afterwards
    with tempfile.TemporaryDirectory(prefix="interp-workers-") as tmp:
        spawn_args = (fn, args, workers, _free_port(), _backend(device), float(timeout), threads, tmp, key)
        # torch's spawn writes each failed worker's traceback to a pytorch-errorfile-*.pickle in the
        # temp dir and leaves it there: point the temp dir at ours, which is removed afterwards
        saved, tempfile.tempdir = tempfile.tempdir, tmp
        try:
            context = mp.start_processes(_entry, args=spawn_args, nprocs=workers, join=False, start_method="spawn")
            try:
                while not context.join():
                    pass
            except ProcessException as e:
                raise _spawn_error(e, tmp, workers) from None
            finally:
                _stop(context.processes)
        finally:
            tempfile.tempdir = saved
        return _read_result(tmp, key, workers)


def _stop(processes: Sequence) -> None:
    """Stop the workers still running (the parent was interrupted, or another worker failed)."""
    for p in processes:
        if p.is_alive():
            p.terminate()
    for p in processes:
        p.join(10)
        if p.is_alive():
            p.kill()
            p.join()
