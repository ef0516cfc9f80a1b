"""Who may act: the bearer token, the browser session and its CSRF token
(docs/dashboard.md, "Security").

* Reading (every ``GET``) needs nothing: the dashboard binds 127.0.0.1 by default; expose it
  beyond the host only behind your own authentication.
* Acting (retry, undo, cancel, resume, requeue, purge) needs the configured token, either as
  ``Authorization: Bearer <token>`` (API clients) or as a session cookie set by the login form
  plus the CSRF token that every form of the page carries (browsers). Without a token the
  dashboard is read-only, whatever else is asked; ``read_only=True`` also disables actions
  when a token is configured.
* The session cookie is ``<nonce>.<HMAC-SHA256(token, "session:" + nonce)>`` (HttpOnly,
  SameSite=Strict) and the CSRF token ``HMAC-SHA256(token, "csrf:" + nonce)``: nothing is kept
  server-side, a restart with the same token keeps sessions valid and a new token ends them.
  Every comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Final

from reactor.dashboard.errors import Forbidden, Unauthorized
from reactor.errors import ConfigurationError

__all__ = ["CSRF_FIELD", "CSRF_HEADER", "SESSION_COOKIE", "Credentials", "Guard"]

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


@dataclass(frozen=True)
class Guard:
    """The dashboard's action policy (see the module docstring).

    Attributes:
        token: the token actions require, or ``None`` (read-only).
        read_only: actions are disabled.
    """

    token: str | None
    read_only: bool

    @classmethod
    def of(cls, token: str | None, read_only: bool | None) -> Guard:
        """Check the options of :func:`reactor.dashboard.create_app`.

        Args:
            token: the action token; ``None`` or ``""``: no token.
            read_only: ``None`` (default): read-only exactly when there is no token.

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
                "a dashboard with actions needs a token (--token or REACTOR_DASHBOARD_TOKEN); "
                "without one it is read-only"
            )
        return cls(token=token, read_only=token is None if read_only is None else read_only)

    @property
    def actions_enabled(self) -> bool:
        """Whether any action may run at all."""
        return not self.read_only and self.token is not None

    def open_session(self, candidate: str) -> str | None:
        """The session cookie value for a login with ``candidate``, or ``None`` when it is not
        the token (or actions are disabled)."""
        token = self.token
        if token is None or not self.actions_enabled:
            return None
        if not hmac.compare_digest(candidate.encode("utf-8"), token.encode("utf-8")):
            return None
        nonce = secrets.token_urlsafe(18)
        return f"{nonce}.{_sign(token, 'session', nonce)}"

    def _nonce(self, session: str | None) -> str | None:
        """The nonce of a valid session cookie, else ``None``."""
        token = self.token
        if token is None or not session or session.count(".") != 1:
            return None
        nonce, signature = session.split(".")
        expected = _sign(token, "session", nonce)
        return nonce if hmac.compare_digest(signature.encode(), expected.encode()) else None

    def signed_in(self, session: str | None) -> bool:
        """Whether ``session`` is a valid session cookie (and actions are enabled)."""
        return self.actions_enabled and self._nonce(session) is not None

    def csrf_token(self, session: str | None) -> str | None:
        """The CSRF token the pages of a valid session carry, else ``None``."""
        nonce = self._nonce(session) if self.actions_enabled else None
        return None if nonce is None or self.token is None else _sign(self.token, "csrf", nonce)

    def check(self, credentials: Credentials) -> None:
        """Allow an action, or raise why not.

        Raises:
            Forbidden: the dashboard is read-only, or a session came without its CSRF token.
            Unauthorized: neither a valid bearer token nor a valid session.
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
            if hmac.compare_digest(value.strip().encode("utf-8"), token.encode("utf-8")):
                return
            raise Unauthorized("the bearer token is not valid", code="bad_token")
        expected = self.csrf_token(credentials.session)
        if expected is None:
            raise Unauthorized(
                "actions need 'Authorization: Bearer <token>' or a signed-in session",
                code="unauthorized",
            )
        if not credentials.csrf or not hmac.compare_digest(
            credentials.csrf.encode("utf-8"), expected.encode("utf-8")
        ):
            raise Forbidden("the form's CSRF token is missing or wrong", code="bad_csrf")
