"""Who may act: the bearer token, the browser session and its CSRF token, and the throttle on
failed attempts (docs/dashboard.md, "Security"; docs/security.md, "The dashboard").

* Reading (every ``GET``) needs nothing: the dashboard binds 127.0.0.1 by default; expose it
  beyond the host only behind your own authentication.
* Acting (retry, undo, cancel, resume, requeue, purge) needs the configured token, either as
  ``Authorization: Bearer <token>`` (API clients) or as a session cookie set by the login form
  plus the CSRF token that every form of the page carries (browsers). Without a token the
  dashboard is read-only, whatever else is asked; ``read_only=True`` also disables actions
  when a token is configured.
* The session cookie is ``<nonce>.<HMAC-SHA256(token, "session:" + nonce)>`` (HttpOnly,
  SameSite=Strict) and the CSRF token ``HMAC-SHA256(token, "csrf:" + nonce)``. The nonce must
  also be in this process's session table (:class:`Sessions`): a session ends at sign-out, after
  :attr:`SessionPolicy.idle_seconds` without use, after :attr:`SessionPolicy.max_age_seconds`
  whatever its use, and when the process restarts; a new token ends every session too (the
  signature no longer matches). A cookie alone never acts: every action also needs the CSRF
  token, which only a page of this dashboard's origin can read.
* Failed attempts — a wrong token at ``/login`` or in a bearer header — are counted per client
  address (:class:`Throttle`); past the limit the address gets 429 with ``Retry-After`` until
  its window ends. Every comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from reactor.dashboard.errors import Forbidden, TooManyAttempts, Unauthorized
from reactor.errors import ConfigurationError

__all__ = [
    "CSRF_FIELD",
    "CSRF_HEADER",
    "LOOPBACK_HOSTS",
    "SESSION_COOKIE",
    "Clock",
    "Credentials",
    "Guard",
    "SessionPolicy",
    "Sessions",
    "Throttle",
    "allowed_hosts",
    "host_pattern",
]

#: A monotonic clock in seconds (``time.monotonic``; tests inject their own).
Clock = Callable[[], float]


def system_monotonic() -> float:
    """The system's monotonic clock in seconds, read at call time (the default :data:`Clock`;
    docs/testing.md, "The clock")."""
    return time.monotonic()

#: The session cookie's name.
SESSION_COOKIE: Final = "reactor_dashboard_session"
#: The form field carrying the CSRF token.
CSRF_FIELD: Final = "csrf_token"
#: The header carrying the CSRF token (htmx requests).
CSRF_HEADER: Final = "x-csrf-token"
#: Shortest accepted token, in characters.
MIN_TOKEN_LENGTH: Final = 8


def _sign(token: str, purpose: str, nonce: str) -> str:
    message = f"{purpose}:{nonce}".encode()
    return hmac.new(token.encode("utf-8"), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Credentials:
    """What a request brought to prove it may act.

    Attributes:
        authorization: the ``Authorization`` header, if any.
        session: the session cookie, if any.
        csrf: the CSRF token from the form field or the header, if any.
    """

    authorization: str | None = None
    session: str | None = None
    csrf: str | None = None
    client: str | None = None


@dataclass(frozen=True)
class SessionPolicy:
    """How long a browser session lives (docs/dashboard.md, "Security").

    Attributes:
        idle_seconds: a session unused this long ends (default 30 minutes).
        max_age_seconds: a session ends this long after sign-in, used or not (default 12
            hours).
        max_sessions: sessions kept at once; signing in beyond it ends the oldest.

    Raises:
        ConfigurationError: a duration or the count is not positive (names the field).
    """

    idle_seconds: float = 30 * 60.0
    max_age_seconds: float = 12 * 3600.0
    max_sessions: int = 1000

    def __post_init__(self) -> None:
        for name in ("idle_seconds", "max_age_seconds", "max_sessions"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not (
                math.isfinite(value) and value > 0
            ):
                raise ConfigurationError(
                    f"dashboard session {name} must be a positive number, got {value!r}"
                )


class Sessions:
    """This process's table of open browser sessions: nonce -> (signed in at, last used at),
    read on a monotonic :data:`Clock` in seconds. Thread-safe.

    Args:
        policy: the idle and absolute lifetimes.
        clock: the clock (default :func:`system_monotonic`).
    """

    def __init__(self, policy: SessionPolicy | None = None, clock: Clock | None = None
                 ) -> None:
        self.policy = policy or SessionPolicy()
        self._clock = clock or system_monotonic
        self._lock = threading.Lock()
        self._open: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def open(self) -> str:
        """Start a session; returns its new random nonce."""
        nonce = secrets.token_urlsafe(18)
        now = self._clock()
        with self._lock:
            self._open[nonce] = (now, now)
            while len(self._open) > self.policy.max_sessions:
                self._open.popitem(last=False)
        return nonce

    def use(self, nonce: str) -> bool:
        """Whether session ``nonce`` is open now; an open one counts as used now (its idle
        time restarts), an expired one is ended."""
        now = self._clock()
        with self._lock:
            found = self._open.get(nonce)
            if found is None:
                return False
            started, last = found
            if (now - last >= self.policy.idle_seconds
                    or now - started >= self.policy.max_age_seconds):
                del self._open[nonce]
                return False
            self._open[nonce] = (started, now)
            return True

    def end(self, nonce: str) -> None:
        """End session ``nonce`` (sign-out); unknown nonces are ignored."""
        with self._lock:
            self._open.pop(nonce, None)

    def end_all(self) -> None:
        """End every session."""
        with self._lock:
            self._open.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)


class Throttle:
    """Failed sign-in and bearer attempts per client address: more than ``limit`` failures
    within ``window_seconds`` refuse that address until the window of its oldest counted
    failure ends (docs/dashboard.md, "Security"). Thread-safe; at most ``max_clients``
    addresses are tracked (the least recent are forgotten).

    Args:
        limit: failures allowed per window (default 5).
        window_seconds: the window, in seconds (default 60).
        clock: a monotonic clock in seconds (default :func:`system_monotonic`).
        max_clients: addresses tracked at once.
    """

    def __init__(self, limit: int = 5, window_seconds: float = 60.0,
                 clock: Clock | None = None, max_clients: int = 10_000) -> None:
        if limit < 1 or not window_seconds > 0:
            raise ConfigurationError(
                "the dashboard throttle needs limit >= 1 and window_seconds > 0, got "
                f"limit={limit!r}, window_seconds={window_seconds!r}"
            )
        self.limit = limit
        self.window_seconds = window_seconds
        self._clock = clock or system_monotonic
        self._max_clients = max_clients
        self._lock = threading.Lock()
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, client: str, now: float) -> deque[float]:
        failures = self._failures.get(client)
        if failures is None:
            return deque()
        while failures and now - failures[0] >= self.window_seconds:
            failures.popleft()
        if not failures:
            del self._failures[client]
        return failures

    def check(self, client: str | None) -> None:
        """Refuse ``client`` while it is over the limit.

        Raises:
            TooManyAttempts: 429, with the seconds until it may try again.
        """
        now = self._clock()
        with self._lock:
            failures = self._recent(client or "", now)
            if len(failures) >= self.limit:
                wait = self.window_seconds - (now - failures[0])
                raise TooManyAttempts(
                    "too many failed attempts from this address: try again later",
                    retry_after=max(1, math.ceil(wait)),
                )

    def failed(self, client: str | None) -> None:
        """Count one failed attempt of ``client``."""
        now = self._clock()
        key = client or ""
        with self._lock:
            failures = self._recent(key, now)
            failures.append(now)
            self._failures[key] = failures
            self._failures.move_to_end(key)
            while len(self._failures) > self._max_clients:
                self._failures.popitem(last=False)


@dataclass(frozen=True)
class Guard:
    """The dashboard's action policy (see the module docstring).

    Attributes:
        token: the token actions require, or ``None`` (read-only).
        read_only: actions are disabled.
        sessions: the open browser sessions of this dashboard.
        throttle: the failed-attempt counter of this dashboard.
    """

    token: str | None
    read_only: bool
    sessions: Sessions = field(default_factory=Sessions, compare=False)
    throttle: Throttle = field(default_factory=Throttle, compare=False)

    @classmethod
    def of(
        cls,
        token: str | None,
        read_only: bool | None,
        *,
        sessions: SessionPolicy | None = None,
        clock: Clock | None = None,
    ) -> Guard:
        """Check the options of :func:`reactor.dashboard.create_app`.

        Args:
            token: the action token; ``None`` or ``""``: no token.
            read_only: ``None`` (default): read-only exactly when there is no token.
            sessions: the session lifetimes (default :class:`SessionPolicy`).
            clock: the monotonic clock, in seconds, of sessions and the throttle.

        Raises:
            ConfigurationError: ``read_only=False`` without a token, or a token shorter than
                8 characters or holding whitespace.
        """
        token = token or None
        if token is not None and (
            len(token) < MIN_TOKEN_LENGTH or any(c.isspace() for c in token)
        ):
            raise ConfigurationError(
                f"the dashboard token must be at least {MIN_TOKEN_LENGTH} characters without "
                "whitespace"
            )
        if read_only is False and token is None:
            raise ConfigurationError(
                "a dashboard with actions needs a token (--token-file, REACTOR_DASHBOARD_TOKEN "
                "or --token); without one it is read-only"
            )
        return cls(token=token, read_only=token is None if read_only is None else read_only,
                   sessions=Sessions(sessions, clock), throttle=Throttle(clock=clock))

    @property
    def actions_enabled(self) -> bool:
        """Whether any action may run at all."""
        return not self.read_only and self.token is not None

    def open_session(self, candidate: str, client: str | None = None) -> str | None:
        """Sign in: the session cookie value for a login with ``candidate``, or ``None`` when
        it is not the token (counted as a failure of ``client``) or actions are disabled.

        Raises:
            TooManyAttempts: ``client`` failed too often recently (before ``candidate`` is
                even compared).
        """
        token = self.token
        if token is None or not self.actions_enabled:
            return None
        self.throttle.check(client)
        if not hmac.compare_digest(candidate.encode("utf-8"), token.encode("utf-8")):
            self.throttle.failed(client)
            return None
        nonce = self.sessions.open()
        return f"{nonce}.{_sign(token, 'session', nonce)}"

    def _nonce(self, session: str | None) -> str | None:
        """The nonce of a valid, open session cookie, else ``None``."""
        token = self.token
        if token is None or not session or session.count(".") != 1:
            return None
        nonce, signature = session.split(".")
        expected = _sign(token, "session", nonce)
        if not hmac.compare_digest(signature.encode(), expected.encode()):
            return None
        return nonce if self.sessions.use(nonce) else None

    def signed_in(self, session: str | None) -> bool:
        """Whether ``session`` is a valid, open session cookie (and actions are enabled)."""
        return self.actions_enabled and self._nonce(session) is not None

    def csrf_token(self, session: str | None) -> str | None:
        """The CSRF token the pages of a valid session carry, else ``None``."""
        nonce = self._nonce(session) if self.actions_enabled else None
        return None if nonce is None or self.token is None else _sign(self.token, "csrf", nonce)

    def end_session(self, session: str | None) -> None:
        """Sign out: end ``session`` in this process (its cookie is refused from now on)."""
        nonce = self._nonce(session)
        if nonce is not None:
            self.sessions.end(nonce)

    def authenticate(self, credentials: Credentials) -> Literal["bearer", "session"]:
        """Who is asking, before anything of the request body is read: a valid bearer token
        or an open session (whose CSRF token :meth:`check` verifies once the body is read).

        Returns:
            ``"bearer"`` or ``"session"``.

        Raises:
            Forbidden: the dashboard is read-only.
            TooManyAttempts: a bearer token from a client that failed too often recently.
            Unauthorized: a wrong bearer token (counted), or neither a bearer token nor an
                open session.
        """
        token = self.token
        if not self.actions_enabled or token is None:
            raise Forbidden(
                "the dashboard is read-only (start it with a token to enable actions)",
                code="read_only",
            )
        header = credentials.authorization or ""
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value:
            self.throttle.check(credentials.client)
            if hmac.compare_digest(value.strip().encode("utf-8"), token.encode("utf-8")):
                return "bearer"
            self.throttle.failed(credentials.client)
            raise Unauthorized("the bearer token is not valid", code="bad_token")
        if self._nonce(credentials.session) is None:
            raise Unauthorized(
                "actions need 'Authorization: Bearer <token>' or a signed-in session",
                code="unauthorized",
            )
        return "session"

    def check(self, credentials: Credentials) -> None:
        """Allow an action, or raise why not (:meth:`authenticate`, then the CSRF token of a
        session).

        Raises:
            Forbidden: the dashboard is read-only, or a session came without its CSRF token.
            TooManyAttempts: see :meth:`authenticate`.
            Unauthorized: neither a valid bearer token nor an open session.
        """
        if self.authenticate(credentials) == "bearer":
            return
        expected = self.csrf_token(credentials.session)
        if expected is None:  # ended between the two reads
            raise Unauthorized("the session ended", code="unauthorized")
        if not credentials.csrf or not hmac.compare_digest(
            credentials.csrf.encode("utf-8"), expected.encode("utf-8")
        ):
            raise Forbidden("the form's CSRF token is missing or wrong", code="bad_csrf")


#: The names of this host's loopback interface, as they appear in a ``Host`` header.
LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "::1")
_WILDCARD_BINDS: Final = ("0.0.0.0", "::", "")


def host_pattern(name: str) -> str:
    """``name`` as a ``Host`` header carries it: lower case, an IPv6 address in brackets
    (``::1`` -> ``[::1]``); ``*.example.com`` patterns and ``*`` pass unchanged.

    Raises:
        ConfigurationError: ``name`` is empty, holds a port, a path or whitespace.
    """
    value = name.strip().lower()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    bad = not value or any(c.isspace() or c in "/?#@" for c in value)
    if ":" in value and not bad:
        return f"[{value}]"
    if bad or ("*" in value[1:]) or (value.startswith("*") and value not in ("*",)
                                     and not value.startswith("*.")):
        raise ConfigurationError(
            f"allowed host {name!r} is not a host name, an IP address or a '*.domain' pattern"
        )
    return value


def allowed_hosts(bind: str | None, names: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The ``Host`` names a dashboard answers to (docs/dashboard.md, "Security"): the address
    it binds — with every loopback name when that is a loopback or wildcard address — plus
    ``names`` (``--allowed-host``). Any other ``Host`` is refused with 400, so a DNS name
    rebound to this address cannot read the dashboard from a web page.

    Args:
        bind: the bound address (``None``: not known, as for :func:`create_app` alone: the
            loopback names).
        names: extra names or ``*.domain`` patterns; ``"*"`` turns the check off.

    Raises:
        ConfigurationError: a name is not a host name (:func:`host_pattern`).
    """
    hosts: list[str] = []
    if bind is None or bind in LOOPBACK_HOSTS or bind in _WILDCARD_BINDS or bind.startswith(
        "127."
    ):
        hosts.extend(host_pattern(h) for h in LOOPBACK_HOSTS)
    if bind and bind not in _WILDCARD_BINDS:
        hosts.append(host_pattern(bind))
    hosts.extend(host_pattern(n) for n in names)
    return list(dict.fromkeys(hosts))
