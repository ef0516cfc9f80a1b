"""Round trips counted on the client, beside the server's own command counts.

:func:`counting` wraps redis-py's ``AbstractConnection.send_packed_command`` for the whole
process (every connection of every client: the storage's, the router's, a worker's): each
call writes one request and then waits for its replies, so **one call is one round trip**, a
pipeline included (its commands are packed into one write). The packed request is parsed
(RESP arrays) to count the commands it carries by name; an ``EVALSHA`` is also named after
its script (``reactor_redis/scripts/<name>.lua``) and, for scripts with an ``op`` argument,
the op (``lock:acquire``). Sends from the main thread are the *caller*'s, from any other
thread a *worker*'s.

:func:`server_calls` reads the server's ``INFO commandstats`` (``calls`` per command: the
commands clients sent **and** the commands Lua scripts ran) through a connection whose sends
are not counted; :func:`inside_scripts` is the difference, i.e. what ran inside scripts.

Benchmarks print figures, never assert them (benchmarks/_timing.py).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

import redis
from redis.connection import AbstractConnection

__all__ = [
    "SCRIPT_CALLS",
    "Tally",
    "count_calls",
    "counting",
    "format_counts",
    "inside_scripts",
    "paused",
    "server_calls",
    "server_delta",
    "snapshot",
    "unexplained",
]

#: Commands whose second word names a sub-command (``commandstats`` reports ``client|setinfo``).
_CONTAINERS = frozenset({"acl", "client", "cluster", "command", "config", "function", "memory",
                         "object", "script", "xgroup", "xinfo"})  # fmt: skip
#: Script calls: only clients send them (a script never calls a script).
SCRIPT_CALLS = ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro")


@dataclass
class Tally:
    """What the clients of this process sent: round trips and commands, per role."""

    round_trips: Counter[str] = field(default_factory=Counter)
    #: ``(role, command)`` -> commands sent (``evalsha`` once per script call)
    commands: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: ``(role, script[:op])`` -> ``EVALSHA`` calls
    scripts: Counter[tuple[str, str]] = field(default_factory=Counter)

    def copy(self) -> Tally:
        return Tally(Counter(self.round_trips), Counter(self.commands), Counter(self.scripts))

    def __sub__(self, before: Tally) -> Tally:
        return Tally(self.round_trips - before.round_trips, self.commands - before.commands,
                     self.scripts - before.scripts)  # fmt: skip

    def total_round_trips(self) -> int:
        return sum(self.round_trips.values())

    def by_command(self, role: str | None = None) -> Counter[str]:
        """Commands sent by ``role`` (both roles when ``None``), by name."""
        out: Counter[str] = Counter()
        for (who, name), n in self.commands.items():
            if role is None or who == role:
                out[name] += n
        return out

    def by_script(self, role: str | None = None) -> Counter[str]:
        out: Counter[str] = Counter()
        for (who, name), n in self.scripts.items():
            if role is None or who == role:
                out[name] += n
        return out


class _Counter:
    def __init__(self) -> None:
        self.tally = Tally()
        self.lock = threading.Lock()
        self.local = threading.local()
        self.active = False
        self.scripts = _script_names()


def _script_names() -> dict[str, tuple[str, int | None]]:
    """SHA-1 -> (script name, 1-based ARGV index of its ``op`` or ``None``).

    The adapter loads ``_common.lua`` + ``"\\n"`` + ``<name>.lua`` (``reactor_redis._base``).
    """
    try:
        folder = files("reactor_redis") / "scripts"
        common = (folder / "_common.lua").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        return {}
    out: dict[str, tuple[str, int | None]] = {}
    for entry in folder.iterdir():
        name = entry.name
        if not name.endswith(".lua") or name.startswith("_"):
            continue
        source = entry.read_text(encoding="utf-8")
        sha = hashlib.sha1((common + "\n" + source).encode("utf-8")).hexdigest()
        out[sha] = (name.removesuffix(".lua"), _op_index(source))
    return out


def _op_index(source: str) -> int | None:
    """The ARGV index of ``op`` in a ``local a, op = X, ARGV[k]`` line of a script."""
    for match in re.finditer(r"^local ([\w, ]+) = ([^\n]+)$", source, re.M):
        names = [n.strip() for n in match.group(1).split(",")]
        values = [v.strip() for v in match.group(2).split(",")]
        if "op" in names and len(values) == len(names):
            arg = re.fullmatch(r"ARGV\[(\d+)\]", values[names.index("op")])
            if arg:
                return int(arg.group(1))
    return None


_state = _Counter()


def _parse(packed: Any) -> list[list[bytes]]:
    """The commands of one packed request (RESP arrays of bulk strings), as argument lists."""
    chunks = [packed] if isinstance(packed, str | bytes | memoryview) else packed
    data = b"".join(c.encode() if isinstance(c, str) else bytes(c) for c in chunks)
    commands: list[list[bytes]] = []
    pos = 0
    while pos < len(data):
        if data[pos : pos + 1] != b"*":  # not a RESP array: count it as one unknown command
            return [*commands, [b"?"]]
        end = data.index(b"\r\n", pos)
        count, pos = int(data[pos + 1 : end]), end + 2
        args = []
        for _ in range(count):
            end = data.index(b"\r\n", pos)
            length, pos = int(data[pos + 1 : end]), end + 2
            args.append(data[pos : pos + length])
            pos += length + 2
        commands.append(args)
    return commands


def _name(args: list[bytes]) -> str:
    name = args[0].decode("ascii", "replace").lower()
    if name in _CONTAINERS and len(args) > 1:
        return f"{name}|{args[1].decode('ascii', 'replace').lower()}"
    return name


def _script(args: list[bytes]) -> str:
    sha = args[1].decode("ascii", "replace") if len(args) > 1 else "?"
    name, op_index = _state.scripts.get(sha, (sha[:8], None))
    if op_index is not None and len(args) > 2:
        at = 3 + int(args[2]) + op_index - 1  # EVALSHA sha numkeys KEYS... ARGV...
        if at < len(args):
            return f"{name}:{args[at].decode('utf-8', 'replace')}"
    return name


def _record(packed: Any) -> None:
    role = "caller" if threading.current_thread() is threading.main_thread() else "worker"
    commands = _parse(packed)
    with _state.lock:
        tally = _state.tally
        tally.round_trips[role] += 1
        for args in commands:
            name = _name(args)
            tally.commands[role, name] += 1
            if name in ("evalsha", "evalsha_ro"):
                tally.scripts[role, _script(args)] += 1


@contextmanager
def counting() -> Iterator[Tally]:
    """Count every request sent by any redis-py connection of this process while inside.

    Yields the live :class:`Tally`; take :func:`snapshot` s and subtract them. Re-entrant (an
    inner ``counting()`` counts nothing twice).
    """
    if _state.active:
        yield _state.tally
        return
    original: Callable[..., None] = AbstractConnection.send_packed_command

    def send_packed_command(self: AbstractConnection, command: Any, check_health: bool = True
                            ) -> None:  # fmt: skip
        if not getattr(_state.local, "paused", False):
            _record(command)
        original(self, command, check_health)

    AbstractConnection.send_packed_command = send_packed_command  # type: ignore[method-assign]
    _state.active = True
    try:
        yield _state.tally
    finally:
        _state.active = False
        AbstractConnection.send_packed_command = original  # type: ignore[method-assign]


def snapshot() -> Tally:
    """A copy of the counts so far."""
    with _state.lock:
        return _state.tally.copy()


@contextmanager
def paused() -> Iterator[None]:
    """Sends of this thread inside are not counted (the benchmark's own ``INFO`` calls)."""
    _state.local.paused = True
    try:
        yield
    finally:
        _state.local.paused = False


def server_calls(client: redis.Redis) -> Counter[str]:
    """The server's ``INFO commandstats`` ``calls`` per command (not counted as round trips)."""
    with paused():
        info = client.info("commandstats")
    return Counter({name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in info.items()})


def server_delta(before: Counter[str], after: Counter[str]) -> Counter[str]:
    """Commands the server ran between two :func:`server_calls`, our own ``INFO`` excluded."""
    delta = after - before
    for own in [k for k in delta if k == "info" or k.startswith("info|")]:
        del delta[own]
    return delta


def inside_scripts(server: Counter[str], sent: Counter[str]) -> Counter[str]:
    """The server's commands that no client sent: they ran inside scripts (scripts never
    call scripts: a surplus of those is another thread's call that raced the snapshot)."""
    return +Counter(
        {n: calls - sent.get(n, 0) for n, calls in server.items() if n not in SCRIPT_CALLS}
    )


def unexplained(
    server: Counter[str], sent: Counter[str], slack: Counter[str] | None = None
) -> str | None:
    """Why the two counts cannot both be this process's, or ``None`` when they agree.

    Every script call the server ran was sent by a client, and the server counts at least as
    many of each command as this process sent. A name the server did not count at all is left
    out: a command the server does not know (redis-py's handshake sends ``CLIENT SETINFO``,
    unknown before Redis 7.2) is rejected and never reaches ``commandstats``. ``slack``: what
    other threads sent while the server's counts were being read (it may fall on either side).
    """
    slack = slack or Counter()
    scripts_server = sum(server.get(name, 0) for name in SCRIPT_CALLS)
    scripts_sent = sum(sent.get(name, 0) for name in SCRIPT_CALLS)
    scripts_slack = sum(slack.get(name, 0) for name in SCRIPT_CALLS)
    if abs(scripts_server - scripts_sent) > scripts_slack:
        return (f"the server ran {scripts_server} script calls, this process sent "
                f"{scripts_sent}: another client is using the server")  # fmt: skip
    short = sorted(
        name for name, n in sent.items() if 0 < server.get(name, 0) < n - slack.get(name, 0)
    )
    if short:
        return f"the server counted fewer {', '.join(short)} than this process sent"
    return None


def count_calls(
    n: int, fn: Callable[[int], object], stats: redis.Redis
) -> tuple[Tally, Counter[str]]:
    """What ``fn(i)`` for ``i`` in ``range(n)`` sent (counting on) and what the server ran.

    Args:
        n: calls.
        fn: the call.
        stats: a client of the same server, for ``INFO commandstats`` (not counted).
    """
    with counting():
        server_before, before = server_calls(stats), snapshot()
        for i in range(n):
            fn(i)
        sent = snapshot() - before
        return sent, server_delta(server_before, server_calls(stats))


def format_counts(counts: Counter[str] | Iterable[tuple[str, int]], per: float) -> str:
    """``name=1.20, other=0.40`` per unit, most frequent first."""
    items = counts.most_common() if isinstance(counts, Counter) else list(counts)
    return ", ".join(f"{name}={n / per:.2f}" for name, n in items if n) or "none"
