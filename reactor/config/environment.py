"""What a process takes from its environment: the storage and router URLs and the settings,
each after an explicit value and before the default.

**Precedence** (README, "Choosing a backend"): an explicit argument (in code, or a ``reactor``
command's ``--storage``/``--router``/``--setting`` flag, which the command passes as one) wins
over the environment (``REACTOR_STORAGE_URL``, ``REACTOR_ROUTER_URL``, and ``REACTOR_<SETTING>``
for a setting, e.g. ``REACTOR_CONTEXT_TTL``), which wins over the default. Without any
configuration a process uses ``memory://`` and ``local://``, so a fresh install runs with no
server.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any, get_args, get_origin

from pydantic import ValidationError

from reactor.config.settings import Settings
from reactor.errors import ConfigurationError
from reactor.model.secrets import Keyring, configured_specs

__all__ = [
    "DEFAULT_ROUTER_URL",
    "DEFAULT_STORAGE_URL",
    "ROUTER_URL_ENV",
    "SETTING_ENV_PREFIX",
    "STORAGE_URL_ENV",
    "resolve_router_url",
    "resolve_settings",
    "resolve_storage_url",
    "settings_from_environment",
    "validate_settings",
]

#: The storage a process uses when neither code nor the environment names one.
DEFAULT_STORAGE_URL = "memory://"
#: The router a process uses when neither code nor the environment names one.
DEFAULT_ROUTER_URL = "local://"

#: The environment variable naming the storage URL when no explicit one is given.
STORAGE_URL_ENV = "REACTOR_STORAGE_URL"
#: The environment variable naming the router URL when no explicit one is given.
ROUTER_URL_ENV = "REACTOR_ROUTER_URL"
#: A setting ``name`` not passed explicitly is read from ``REACTOR_<NAME>`` (upper case).
SETTING_ENV_PREFIX = "REACTOR_"


def _resolve_url(explicit: str | None, variable: str, default: str) -> str:
    """``explicit``, else the environment ``variable`` when set and not empty, else ``default``."""
    if explicit is not None:
        return explicit
    return os.environ.get(variable) or default


def resolve_storage_url(explicit: str | None = None) -> str:
    """The storage URL a process uses: ``explicit`` when given, else ``REACTOR_STORAGE_URL``
    when set and not empty, else :data:`DEFAULT_STORAGE_URL` (README, "Choosing a backend").

    Args:
        explicit: a URL from code or from a command's ``--storage`` flag; ``None``: not given.

    Returns:
        The URL (not validated: :func:`reactor.config.storage_from_url` does that).
    """
    return _resolve_url(explicit, STORAGE_URL_ENV, DEFAULT_STORAGE_URL)


def resolve_router_url(explicit: str | None = None) -> str:
    """The router URL a process uses: ``explicit`` when given, else ``REACTOR_ROUTER_URL``
    when set and not empty, else :data:`DEFAULT_ROUTER_URL` (README, "Choosing a backend").

    Args:
        explicit: a URL from code or from a command's ``--router`` flag; ``None``: not given.

    Returns:
        The URL (not validated: :func:`reactor.config.router_from_url` does that).
    """
    return _resolve_url(explicit, ROUTER_URL_ENV, DEFAULT_ROUTER_URL)


def _is_sequence_field(name: str) -> bool:
    """Whether the :class:`Settings` field ``name`` holds a list/tuple/set (env: comma-split)."""
    field = Settings.model_fields.get(name)
    if field is None:
        return False
    annotations = [field.annotation, *get_args(field.annotation)]
    return any(get_origin(a) in (list, tuple, set, frozenset) or a in (list, tuple)
               or get_origin(a) is Sequence for a in annotations)


def settings_from_environment(
    explicit: Mapping[str, Any] | None = None,
) -> dict[str, str | list[str] | None]:
    """The settings the environment sets and ``explicit`` does not (explicit wins).

    A :class:`Settings` field ``name`` is read from ``REACTOR_<NAME>`` (e.g.
    ``REACTOR_CONTEXT_TTL=3600``); an empty variable is ignored, ``none``/``null`` means
    ``None``, and a list-valued field takes comma-separated values (README, "Choosing a
    backend").

    Args:
        explicit: the settings given in code or with ``--setting`` (their names are skipped;
            ``None``: none).

    Returns:
        ``{field: raw value}`` for :func:`reactor.config.configure` to validate.
    """
    found: dict[str, str | list[str] | None] = {}
    for name in Settings.model_fields:
        if explicit is not None and name in explicit:
            continue
        raw = os.environ.get(SETTING_ENV_PREFIX + name.upper())
        if raw is None or not raw.strip():
            continue
        if raw.strip().lower() in ("none", "null"):
            found[name] = None
        elif _is_sequence_field(name):
            found[name] = [part.strip() for part in raw.split(",") if part.strip()]
        else:
            found[name] = raw.strip()
    return found


def validate_settings(values: Mapping[str, Any], from_env: Collection[str] = ()) -> Settings:
    """Validate ``values`` into :class:`Settings` (README, "Choosing a backend").

    Args:
        values: ``{field: value}``, raw values as code, flags or the environment give them.
        from_env: the fields whose value was read from ``REACTOR_<FIELD>`` (named in the error).

    Returns:
        The validated settings.

    Raises:
        ConfigurationError: naming each bad field, what it got (hidden for a field whose name
            says ``secret``) and, for a value read from the environment, the variable.
    """
    try:
        return Settings(**values)
    except ValidationError as exc:

        def problem(err: Any) -> str:
            field = str(err["loc"][0]) if err["loc"] else ""
            got = "<hidden>" if "secret" in field else repr(err.get("input"))
            source = f" from {SETTING_ENV_PREFIX}{field.upper()}" if field in from_env else ""
            return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (got {got}{source})"

        problems = "; ".join(problem(err) for err in exc.errors())
        raise ConfigurationError(f"invalid reactor settings: {problems}") from exc


def resolve_settings(explicit: Mapping[str, Any] | None = None) -> Settings:
    """The settings a process uses: ``explicit`` ones, then ``REACTOR_<SETTING>`` variables,
    then the defaults, validated as :func:`reactor.config.configure` validates them (README,
    "Choosing a backend"), the secret keys included (docs/security.md, "Keys").

    Args:
        explicit: settings from code or from a command's ``--setting`` flags.

    Returns:
        The validated settings.

    Raises:
        ConfigurationError: a setting is invalid (naming the field, and the variable when it
            came from the environment), or a secret key is malformed.
    """
    values = dict(explicit or {})
    from_env = settings_from_environment(values)
    parsed = validate_settings({**from_env, **values}, from_env)
    source, specs = configured_specs(parsed.secret_keys)
    Keyring(specs, source=source)  # a malformed key fails here, not at the first secret run
    return parsed
