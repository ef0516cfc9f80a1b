"""Backend URLs: :func:`redact_url` hides the credentials a URL carries, and
:class:`UrlOptions` reads a URL's query options as typed values.

Every message, log line or exception that quotes a backend URL (an adapter's
``ConfigurationError`` for a bad option, the CLI's output) passes it through
:func:`redact_url` first, so a password given as ``redis://:pw@host/0`` never reaches a
terminal or a log (docs/workers.md, "Running workers"). Adapters import both from here (they
depend on :mod:`reactor.ports` and :mod:`reactor.model` only; docs/protocol.md, "Adapter
toolkit").
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Mapping
from urllib.parse import parse_qsl, unquote_plus

from reactor.errors import ConfigurationError

__all__ = ["SECRET_OPTION_WORDS", "UrlOptions", "is_secret_option", "redact_url"]

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


#: Words a boolean option reads as true or as false (any case).
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
#: Longest option value (or name) quoted whole in a message; a longer one is cut.
_SHOWN_VALUE_CHARS = 80
#: Longest redacted URL quoted whole in a message; a longer one is cut.
_SHOWN_URL_CHARS = 300


def _quote(text: str, limit: int) -> str:
    """``repr(text)``, cut to ``limit`` characters (with the full length named) when longer."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def _number_text(value: float) -> str:
    """A bound as a message shows it: ``0``, ``43200``, ``0.5``."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _alternatives(choices: Iterable[str]) -> str:
    """``'a', 'b' or 'c'``."""
    quoted = [repr(choice) for choice in choices]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


class UrlOptions(Mapping[str, str]):
    """The query options of one backend URL, read as typed values (docs/protocol.md, "Adapter
    toolkit").

    A read-only mapping of option name to its raw text (what :func:`urllib.parse.parse_qsl`
    gives), plus typed readers (:meth:`number`, :meth:`integer`, :meth:`boolean`,
    :meth:`choice`, :meth:`text`) that return the option's default when it is absent and raise
    :class:`reactor.errors.ConfigurationError` for a bad value. Every message names the option,
    the bad value (``***`` for a non-empty option named like a secret, :func:`is_secret_option`;
    passed through :func:`redact_url` when it holds an ``@``; cut when longer than 80
    characters) and the URL passed through :func:`redact_url`, e.g.
    ``Redis URL option socket_timeout='-1' must be > 0 seconds (in 'redis://:***@h/0?...')``.

    Numbers are parsed by Python's ``float``/``int``: surrounding spaces, ``_`` digit groups and
    non-ASCII decimal digits are read as Python reads them; ``nan`` and ``inf`` are refused; a
    ``-0`` reads as ``0``.

    Args:
        values: option name -> raw text, or ``(name, text)`` pairs (a later pair wins).
        url: the URL the options came from; kept only redacted (:attr:`redacted_url`).
        label: how messages name an option, e.g. ``"Redis URL option"``.

    Attributes:
        label: as given.
        redacted_url: ``redact_url(url)``, what messages quote.
    """

    __slots__ = ("_values", "label", "redacted_url")

    def __init__(
        self,
        values: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        *,
        url: str = "",
        label: str = "URL option",
    ) -> None:
        self._values: dict[str, str] = dict(values)
        self.label = label
        self.redacted_url = redact_url(url)

    @classmethod
    def parse(
        cls,
        query: str,
        *,
        url: str,
        label: str = "URL option",
        accepted: Collection[str] | None = None,
        repeated: bool = True,
    ) -> UrlOptions:
        """The options of a URL's query string (blank values kept: ``name=`` is ``""``).

        Args:
            query: the query, without its ``?`` (``urlsplit(url).query``).
            url: the whole URL, for messages (only ever shown redacted).
            label: how messages name an option.
            accepted: the option names allowed; ``None`` accepts any name.
            repeated: whether an option may be given more than once (the last one wins);
                ``False`` refuses a repeat.

        Returns:
            The options.

        Raises:
            ConfigurationError: a name not in ``accepted`` (the message names every unknown
                option and lists the accepted ones), or a repeated name when ``repeated`` is
                false.
        """
        pairs = parse_qsl(query, keep_blank_values=True)
        if accepted is not None:
            unknown = list(dict.fromkeys(name for name, _ in pairs if name not in accepted))
            if unknown:
                names = ", ".join(_quote(name, _SHOWN_VALUE_CHARS) for name in unknown)
                raise ConfigurationError(
                    f"unknown {label}{'s' if len(unknown) > 1 else ''} {names} in "
                    f"{_quote(redact_url(url), _SHOWN_URL_CHARS)} "
                    f"(accepted: {', '.join(sorted(accepted))})"
                )
        values: dict[str, str] = {}
        for name, value in pairs:
            if not repeated and name in values:
                raise ConfigurationError(
                    f"{label} {name!r} is given twice in "
                    f"{_quote(redact_url(url), _SHOWN_URL_CHARS)}"
                )
            values[name] = value
        return cls(values, url=url, label=label)

    # -- the mapping ----------------------------------------------------------------------

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = {k: "***" if is_secret_option(k) else v for k, v in self._values.items()}
        return f"UrlOptions({shown!r}, label={self.label!r})"

    # -- typed readers --------------------------------------------------------------------

    def invalid(self, name: str, requirement: str) -> ConfigurationError:
        """The error for a bad value of option ``name``, in the standard wording.

        For an adapter's own checks beyond the typed readers (a region name, an endpoint).

        Args:
            name: the option.
            requirement: what the value must be, e.g. ``"must be a whole number >= 1"``.

        Returns:
            ``ConfigurationError("<label> <name>=<value> <requirement> (in <redacted URL>)")``
            (to raise).
        """
        raw = self._values.get(name, "")
        if raw and is_secret_option(name):
            shown = "***"
        else:  # a value with user info (endpoint_url=http://u:pw@host) is redacted too
            shown = _quote(redact_url(raw) if "@" in raw else raw, _SHOWN_VALUE_CHARS)
        where = f" (in {_quote(self.redacted_url, _SHOWN_URL_CHARS)})" if self.redacted_url else ""
        return ConfigurationError(f"{self.label} {name}={shown} {requirement}{where}")

    def _raw(self, name: str, allow_empty: bool) -> str | None:
        """The raw text, or ``None`` when the reader must return its default."""
        raw = self._values.get(name)
        if raw is None or (raw == "" and allow_empty):
            return None
        return raw

    def _check_range(
        self,
        name: str,
        value: float,
        minimum: float | None,
        exclusive_minimum: float | None,
        maximum: float | None,
        unit: str,
    ) -> None:
        if (
            (minimum is None or value >= minimum)
            and (exclusive_minimum is None or value > exclusive_minimum)
            and (maximum is None or value <= maximum)
        ):
            return
        bounds = []
        if exclusive_minimum is not None:
            bounds.append(f"> {_number_text(exclusive_minimum)}")
        if minimum is not None:
            bounds.append(f">= {_number_text(minimum)}")
        if maximum is not None:
            bounds.append(f"<= {_number_text(maximum)}")
        raise self.invalid(name, f"must be {' and '.join(bounds)}{f' {unit}' if unit else ''}")

    def number(
        self,
        name: str,
        default: float,
        *,
        minimum: float | None = None,
        exclusive_minimum: float | None = None,
        maximum: float | None = None,
        unit: str = "",
        allow_empty: bool = True,
    ) -> float:
        """A finite number, e.g. a duration in seconds.

        Args:
            name: the option.
            default: returned (as a ``float``) when the option is absent (or empty, with
                ``allow_empty``); never checked against the bounds.
            minimum: the smallest value accepted (inclusive).
            exclusive_minimum: every accepted value is greater than this.
            maximum: the largest value accepted (inclusive).
            unit: named after the bounds in messages, e.g. ``"seconds"``.
            allow_empty: ``name=`` reads as ``default``; ``False`` refuses it.

        Returns:
            The value (``-0`` reads as ``0.0``).

        Raises:
            ConfigurationError: not a number, ``nan`` or an infinity, or out of bounds.
        """
        raw = self._raw(name, allow_empty)
        if raw is None:
            return float(default)
        try:
            value = float(raw)
        except ValueError as exc:
            raise self.invalid(name, "must be a number") from exc
        if not math.isfinite(value):
            raise self.invalid(name, "must be a finite number")
        self._check_range(name, value, minimum, exclusive_minimum, maximum, unit)
        return value + 0.0

    def integer(
        self,
        name: str,
        default: int,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
        unit: str = "",
        allow_empty: bool = True,
    ) -> int:
        """An integer written as one (``2``, never ``2.0``), e.g. a count or a database index.

        Args:
            name: the option.
            default: returned when the option is absent (or empty, with ``allow_empty``).
            minimum: the smallest value accepted (inclusive).
            maximum: the largest value accepted (inclusive).
            unit: named after the bounds in messages, e.g. ``"seconds"``.
            allow_empty: ``name=`` reads as ``default``; ``False`` refuses it.

        Returns:
            The value.

        Raises:
            ConfigurationError: not an integer (a fraction, an exponent, more digits than
                Python converts), or out of bounds.
        """
        raw = self._raw(name, allow_empty)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError as exc:
            raise self.invalid(name, "must be an integer") from exc
        self._check_range(name, value, minimum, None, maximum, unit)
        return value

    def boolean(self, name: str, default: bool, *, allow_empty: bool = True) -> bool:
        """A flag: ``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off``, any case.

        Args:
            name: the option.
            default: returned when the option is absent (or empty, with ``allow_empty``).
            allow_empty: ``name=`` reads as ``default``; ``False`` refuses it.

        Returns:
            The flag.

        Raises:
            ConfigurationError: any other value.
        """
        raw = self._raw(name, allow_empty)
        if raw is None:
            return default
        lowered = raw.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise self.invalid(name, "must be true or false (1/0, yes/no, on/off)")

    def choice(
        self,
        name: str,
        default: str,
        choices: Collection[str],
        *,
        ignore_case: bool = False,
        allow_empty: bool = True,
    ) -> str:
        """One of a fixed set of words.

        Args:
            name: the option.
            default: returned when the option is absent (or empty, with ``allow_empty``).
            choices: the accepted words (lower case when ``ignore_case``), in the order
                messages list them.
            ignore_case: compare the value lower-cased (and return it lower-cased).
            allow_empty: ``name=`` reads as ``default``; ``False`` refuses it.

        Returns:
            The word.

        Raises:
            ConfigurationError: any other value.
        """
        raw = self._raw(name, allow_empty)
        if raw is None:
            return default
        value = raw.lower() if ignore_case else raw
        if value not in choices:
            raise self.invalid(name, f"must be {_alternatives(choices)}")
        return value

    def text(self, name: str, default: str, *, allow_empty: bool = True) -> str:
        """Free text, e.g. a name or a path.

        Args:
            name: the option.
            default: returned when the option is absent.
            allow_empty: ``name=`` reads as ``""``; ``False`` refuses it.

        Returns:
            The raw text.

        Raises:
            ConfigurationError: an empty value when ``allow_empty`` is false.
        """
        raw = self._values.get(name)
        if raw is None:
            return default
        if raw == "" and not allow_empty:
            raise self.invalid(name, "must not be empty")
        return raw
