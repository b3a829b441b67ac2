"""``interp explore``: a local web page that runs the model on the text you type.

    interp explore --model smollm2 --heads out/smollm2/heads.csv
    interp explore --model smollm2 --heads out/smollm2/heads.csv --catalogue out/smollm2
    interp explore --model minilm --port 8800
    interp explore --model path/to/checkpoint --max-tokens 256

Loads the model once, binds 127.0.0.1 (``--host`` to change it; anything but loopback prints a
warning: the page runs the model for whoever can reach it), prints the address, and serves until
Ctrl-C. It reads nothing but the model, ``--heads``, ``--catalogue`` and its own templates, and writes
nothing.

``--catalogue`` (``interp catalogue``'s catalogue.csv, or the folder holding one) puts a clicked head's
verdicts beside its pattern. It is read only when given, never looked for beside ``--heads`` (explore
takes the heads table as a file, not an output folder), and checked before the model loads: a
missing file or one that is not a catalogue is a one-line error (exit 2), as is, once the model has
loaded, a catalogue of another model.

Stopping: this command owns SIGINT and SIGTERM from before the model loads until the server has shut
down (``_Stop``), and uvicorn's own capture is switched off. uvicorn's way (catch the signal, shut
down, put the previous handler back and raise the signal again, which asyncio's runner turns into a
cancelled main task and then a KeyboardInterrupt) loses the signal whenever a link of that chain does
not hold: a SIGINT inherited as ignored (a background job, some CI runners) is put back as ignored and
re-raised into nothing; a signal in the window before uvicorn installs its handler cancels the task
instead. Here one flag records the signal, and "interp explore: stopped" is printed from it. The
window before this command's handler is in place (Python importing the commands, binding the port)
is closed too: ``interp``'s ``main`` blocks both signals first thing, and runs this command
(``OWNS_SIGNALS``) with them still blocked; ``_Stop.installed`` unblocks them, so a signal that came
meanwhile reaches ``_Stop``, not a half-loaded parser (a traceback) or ``main`` (exit 130). A client
that stalls mid-request holds the shutdown for at most ``GRACE`` seconds; requests queued for the
model are skipped (``_server``: ``Session.stop``), since uvicorn's cancellation waits for each worker
thread's forward pass; a second Ctrl-C stops at once, without a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import signal
import socket
import sys
import threading

from analyses.cli.common import Terminated, add_model_arguments, load_model
from analyses.explore.limits import DEFAULT_MAX_TOKENS

OWNS_SIGNALS = True  # interp's main holds SIGINT/SIGTERM until _Stop is installed (analyses.cli.main)
GRACE = 5  # seconds a shutdown waits for requests still running (a client stalled mid-body) before cancelling them


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--heads", default=None, help="a heads.csv from `interp probe`: colours the grid by role")
    parser.add_argument(
        "--catalogue",
        default=None,
        help="a catalogue.csv from `interp catalogue` (or its folder, out/MODEL): a clicked head shows its verdicts",
    )
    parser.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765; 0: any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, this machine only)")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_TOKENS,
        help=f"token budget per text (default {DEFAULT_MAX_TOKENS}; the model's context is the hard limit)",
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket, so that a taken port is a one-line error before uvicorn starts."""
    if not 0 <= port <= 65535:
        raise ValueError(f"--port must be in 0..65535, got {port}")
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ValueError(f"--host {host!r} is not an address this machine can bind ({e.strerror})") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as e:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {e.strerror}; pick another --port (0: any free one)") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class _Stop:
    """SIGINT and SIGTERM for the whole command: while the model loads they raise (KeyboardInterrupt,
    ``Terminated``) so that loading stops; once ``server`` is set they ask it to shut down (a second
    signal: at once). ``signals`` records every signal that came."""

    def __init__(self):
        self.server = None
        self.signals: list[int] = []

    def __call__(self, signum, frame) -> None:
        self.signals.append(signum)
        if self.server is None:
            raise KeyboardInterrupt if signum == signal.SIGINT else Terminated
        if self.server.should_exit:
            self.server.force_exit = True
        self.server.should_exit = True

    @contextlib.contextmanager
    def installed(self):
        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            yield self
            return
        previous = {sig: signal.signal(sig, self) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            # interp's main holds both signals until now (OWNS_SIGNALS): one that came meanwhile is
            # handled here, by this handler, the moment they are released
            if hasattr(signal, "pthread_sigmask"):
                signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _quiet_cancellations(record: logging.LogRecord) -> bool:
    """uvicorn logs a request cancelled at shutdown (a stalled client, a second Ctrl-C) as an
    "Exception in ASGI application" traceback: expected when stopping, so dropped."""
    import asyncio

    return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


def run(args: argparse.Namespace) -> int:
    stop = _Stop()
    sock = None
    try:
        with stop.installed():  # first: a signal from here on (or held by interp's main until now) says stopped
            if args.max_tokens < 1:
                raise ValueError(f"--max-tokens must be a positive integer, got {args.max_tokens}")
            catalogue = _read_catalogue(args.catalogue) if args.catalogue is not None else None
            if not _is_loopback(args.host):
                sys.stderr.write(
                    f"interp explore: warning: --host {args.host} is not loopback: anyone who can reach this machine "
                    "on that address can run the model through the page\n"
                )
            sock = _bind(args.host, args.port)
            _serve(args, sock, stop, catalogue)
    except (KeyboardInterrupt, Terminated):  # a signal before the server was set up (loading the model)
        pass
    finally:
        if sock is not None:
            sock.close()
    if stop.signals:
        sys.stderr.write("interp explore: stopped\n")
    return 0


def _read_catalogue(path: str):
    """``--catalogue``, read and checked (``analyses.explore.catalogue.read``) before the model
    loads; what is wrong with it as one line naming the flag."""
    from analyses.explore.catalogue import read

    try:
        return read(path)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"--catalogue {e}") from None
    except ValueError as e:
        raise ValueError(f"--catalogue {e}") from None


def _server(config, session, announce: str | None = None):
    """uvicorn's server as this command runs it: the command's own signal handlers stay in place
    (uvicorn's capture off); ``announce`` is printed once the server answers; a shutdown first stops
    the session (``Session.stop``), so requests still queued for the model are skipped and the
    shutdown waits for at most the forward pass already running, not for the whole queue."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):  # the command's own handlers (_Stop) stay in place
            yield

        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            if self.started and announce:  # the address is printed once the server answers on it
                print(announce, flush=True)

        async def shutdown(self, sockets=None) -> None:
            session.stop()
            await super().shutdown(sockets=sockets)

    return Server(config)


def _serve(args: argparse.Namespace, sock: socket.socket, stop: _Stop, catalogue=None) -> None:
    import uvicorn

    from analyses.explore.server import allowed_hosts, create_app
    from analyses.explore.session import Session
    from analyses.report.page import read_heads

    heads = read_heads(args.heads) if args.heads else None
    session = Session(load_model(args), heads=heads, max_tokens=args.max_tokens, catalogue=catalogue)
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host and not args.host.startswith("[") else args.host
    app = create_app(session, allowed_hosts(args.host, port))
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=GRACE)
    server = _server(
        config, session, f"interp explore: {session.view.name} at http://{shown}:{port}/ (Ctrl-C stops it)"
    )
    logging.getLogger("uvicorn.error").addFilter(_quiet_cancellations)
    stop.server = server  # from here a signal shuts the server down (before it starts: at once)
    if stop.signals:
        return
    server.run(sockets=[sock])
