"""Backend URLs in messages: :func:`redact_url` hides the credentials a URL carries.

Every message, log line or exception that quotes a backend URL (an adapter's
``ConfigurationError`` for a bad option, the CLI's output) passes it through
:func:`redact_url` first, so a password given as ``redis://:pw@host/0`` never reaches a
terminal or a log (docs/workers.md, "Running workers"). Adapters import it from here (they
depend on :mod:`reactor.ports` and :mod:`reactor.model` only).
"""

from __future__ import annotations

from urllib.parse import unquote_plus

__all__ = ["SECRET_OPTION_WORDS", "is_secret_option", "redact_url"]

#: Query options whose values :func:`redact_url` hides: a name containing one of these (any
#: case), e.g. ``password``, ``aws_secret_access_key``, ``authMechanismProperties``.
SECRET_OPTION_WORDS = (
    "password", "passwd", "secret", "token", "key", "credential", "authmechanismproperties"
)

#: What a hidden value is replaced with.
_HIDDEN = "***"


def is_secret_option(name: str) -> bool:
    """Whether the URL query option ``name`` holds a secret (see :data:`SECRET_OPTION_WORDS`)."""
    lowered = unquote_plus(name).lower()
    return any(word in lowered for word in SECRET_OPTION_WORDS)


def _redact_query(query: str) -> str:
    pairs = []
    for pair in query.split("&"):
        name, sep, value = pair.partition("=")
        if sep and is_secret_option(name):
            value = _HIDDEN
        elif sep and "@" in unquote_plus(value):
            value = redact_url(unquote_plus(value))  # e.g. endpoint_url=http://u:pw@host
        pairs.append(f"{name}{sep}{value}")
    return "&".join(pairs)


def redact_url(url: str) -> str:
    """``url`` with its credentials hidden, for messages and logs: the user info's password
    (or the whole user info when it has no ``:``) and the values of query options named like
    a secret (:func:`is_secret_option`) become ``***``; a query value that is itself a URL
    with user info (``endpoint_url=http://u:pw@host``) is redacted too.

    Works on any string, well-formed or not (no parsing step can fail): a password with an
    unencoded ``/``, ``#`` or ``@``, a bad port, an unclosed ``[`` are all hidden.

    Args:
        url: a backend URL, e.g. ``redis://user:pw@host:6379/0``.

    Returns:
        e.g. ``redis://user:***@host:6379/0``; a string without ``://`` comes back as ``***``
        when it has an ``@`` (it may be a mistyped URL with credentials), else unchanged.
    """
    if "://" not in url:
        return _HIDDEN if "@" in url else url
    scheme, _, rest = url.partition("://")
    at = rest.partition("?")[0].rfind("@")
    if at < 0 and "@" in rest and "/" not in rest[: rest.find("@")]:
        at = rest.find("@")  # a password with an unencoded "?": still user info
    userinfo, host_and_rest = (rest[:at], rest[at + 1 :]) if at >= 0 else (None, rest)
    head, qmark, query = host_and_rest.partition("?")
    if userinfo is not None:
        user, colon, _password = userinfo.partition(":")
        shown_user = f"{user}:" if colon and "/" not in user and "#" not in user else ""
        head = f"{shown_user}{_HIDDEN}@{head}"
    if qmark:
        query, hash_mark, fragment = query.partition("#")
        query = _redact_query(query) + hash_mark + fragment
    return f"{scheme}://{head}{qmark}{query}"
