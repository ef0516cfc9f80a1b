"""The strength runner's harness: one pytest session per mutant, each in a process of its own,
forked from a process that has already imported what every session imports.

A fresh interpreter spends about 5 of the 6 CPU seconds of a short mutant run importing
pytest, hypothesis, pydantic, the backends' client libraries and reactor; the strength module
starts about 75 such runs. The fork server (``python -m tests.contract_strength.forkserver``,
started from the repository root as ``python -m pytest`` would be) imports them once
(:data:`PRELOAD`), then forks one child per request. The child takes the request's
environment and working directory, sends its output to the request's file and runs
``pytest.main(args)``: a whole session, with its own configuration, plugins, collection and
exit code, exactly as a ``python -m pytest ARGS`` subprocess would run it.

Never preloaded, so that each child imports them afresh, as a subprocess would:

* the ``reactor_contract`` package: pytest imports its test modules with assertion rewriting,
  which gives the failure messages the mutant tests look for;
* ``reactor_mutants``: it reads ``REACTOR_MUTANTS_IMPORT_DELAY`` when imported (the slow-import
  test sets it for one run).

Preloaded modules of distributions that declare pytest plugins (reactor, hypothesis) cannot be
assertion-rewritten in a child, which pytest reports as a ``PytestAssertRewriteWarning``; the
runner ignores that warning (``-W``), so the asserts inside reactor itself keep plain messages.
Each child reseeds :mod:`random`, which it would otherwise inherit from the server.

Protocol (one JSON object per line): the client writes ``{"id", "args", "env", "cwd",
"output"}`` to run a session or ``{"kill": id}`` to SIGKILL one (its whole process group); the
server answers ``{"id", "code"}`` when a child exits (a negative code: killed by that signal).
End of input stops the server, which kills the children still running.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["PRELOAD", "ForkServer", "serve"]

ROOT = Path(__file__).resolve().parents[2]

#: What every mutant run imports (the heavy part of its start-up).
PRELOAD = (
    "pytest",
    "hypothesis",
    "pydantic",
    "redis",
    "pymongo",
    "mongomock",
    "boto3",
    "botocore.session",
    "reactor",
    "reactor.config",
    "reactor.facade",
    "reactor.memory",
    "reactor.generic.contexts",
    "reactor.testing",
    "reactor_redis",
    "reactor_redis.probe",
    "reactor_mongodb",
    "reactor_mongodb.probe",
    "reactor_dynamodb",
    "reactor_dynamodb.probe",
    "reactor_sqlite",
)


def _run_child(request: Mapping[str, Any]) -> None:
    """In the forked child: become the requested pytest session; never returns."""
    code = 3  # pytest's "internal error", if anything below escapes
    try:
        os.setpgid(0, 0)  # a kill reaches whatever the session started too
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        out = os.open(request["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        random.seed()
        import pytest

        code = int(pytest.main(list(request["args"])))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def serve() -> None:
    """The server loop (stdin: requests, stdout: exits); see the module docstring."""
    for name in PRELOAD:
        importlib.import_module(name)
    if threading.active_count() != 1:  # forking a threaded process could deadlock a child
        raise RuntimeError(f"a preloaded module started a thread: {threading.enumerate()}")
    children: dict[int, int] = {}  # pid -> request id
    pids: dict[int, int] = {}  # request id -> pid
    pending = b""
    stdin = sys.stdin.fileno()
    open_input = True
    while open_input or children:
        if open_input:
            readable, _, _ = select.select([stdin], [], [], 0.05)
            if readable:
                chunk = os.read(stdin, 65536)
                if not chunk:
                    open_input = False
                    for pid in children:
                        _kill_group(pid)
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    request = json.loads(line)
                    if "kill" in request:
                        pid = pids.get(int(request["kill"]))
                        if pid is not None and pid in children:
                            _kill_group(pid)
                        continue
                    sys.stdout.flush()
                    pid = os.fork()
                    if pid == 0:
                        _run_child(request)
                    try:  # the child does it too: whichever runs first, a kill finds the group
                        os.setpgid(pid, pid)
                    except OSError:
                        pass
                    children[pid] = int(request["id"])
                    pids[int(request["id"])] = pid
        else:
            select.select([], [], [], 0.05)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            ident = children.pop(pid, None)
            if ident is not None:
                pids.pop(ident, None)
                answer = {"id": ident, "code": os.waitstatus_to_exitcode(status)}
                sys.stdout.write(json.dumps(answer) + "\n")
                sys.stdout.flush()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


class ForkServer:
    """The client: starts the server and runs sessions through it, from any thread.

    Args:
        env: the server's environment (its ``PYTHONPATH`` is the sessions' ``sys.path``, so
            every request must carry the same one).
        log: where the server's own errors go.
    """

    def __init__(self, env: Mapping[str, str], log: Path) -> None:
        self._env = dict(env)
        self._log = log
        with open(log, "wb") as errors:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "tests.contract_strength.forkserver"],
                cwd=ROOT, env=self._env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=errors,
            )
        self._write = threading.Lock()
        self._state = threading.Condition()
        self._codes: dict[int, int] = {}
        self._next_id = 0
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="forkserver-reader", daemon=True)
        self._reader.start()

    @property
    def env(self) -> dict[str, str]:
        """The server's environment (a copy): every session's base environment."""
        return dict(self._env)

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            answer = json.loads(line)
            with self._state:
                self._codes[int(answer["id"])] = int(answer["code"])
                self._state.notify_all()
        with self._state:
            self._closed = True
            self._state.notify_all()

    def _send(self, message: Mapping[str, Any]) -> None:
        assert self._proc.stdin is not None
        with self._write:
            self._proc.stdin.write((json.dumps(message) + "\n").encode())
            self._proc.stdin.flush()

    def run(self, args: Sequence[str], *, env: Mapping[str, str], output: Path,
            timeout: float) -> int:
        """Runs ``pytest ARGS`` in a forked child; returns its exit code (its output is in
        ``output``).

        Raises:
            subprocess.TimeoutExpired: the session did not end within ``timeout`` seconds (it
                is killed), as ``subprocess.run(..., timeout=)`` raises it.
            RuntimeError: the server died, or ``env`` has another ``PYTHONPATH``.
        """
        if env.get("PYTHONPATH") != self._env.get("PYTHONPATH"):
            raise RuntimeError("a forked session inherits the server's sys.path: start "
                               "another ForkServer for another PYTHONPATH")
        with self._state:
            ident = self._next_id
            self._next_id += 1
        self._send({"id": ident, "args": list(args), "env": dict(env), "cwd": str(ROOT),
                    "output": str(output)})
        with self._state:
            if self._state.wait_for(lambda: ident in self._codes or self._closed, timeout):
                if ident in self._codes:
                    return self._codes.pop(ident)
                raise RuntimeError(f"the fork server died:\n{self._log.read_text()[-4000:]}")
        self._send({"kill": ident})
        with self._state:
            self._state.wait_for(lambda: ident in self._codes or self._closed, 30)
            self._codes.pop(ident, None)
        raise subprocess.TimeoutExpired(["pytest", *args], timeout)

    def close(self) -> None:
        """Stops the server (killing the sessions still running) and waits for it."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.close()
        finally:
            self._proc.wait(timeout=60)
            self._reader.join(timeout=10)
            if self._proc.stdout is not None:
                self._proc.stdout.close()


if __name__ == "__main__":
    serve()
