"""Middleware by name: the ``reactor.middleware`` entry-point group and the checks of a
``configure(middleware=...)`` argument (docs/observability.md, "Enabling it").
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import entry_points

from reactor.errors import ConfigurationError
from reactor.middleware import Middleware

__all__ = ["MIDDLEWARE_GROUP", "middleware_from_name", "middleware_items"]

#: The entry-point group naming middleware factories (the ``middleware`` setting; the built-in
#: ``otel`` is :class:`reactor.observability.OpenTelemetryMiddleware`).
MIDDLEWARE_GROUP = "reactor.middleware"


def middleware_from_name(name: str) -> Middleware:
    """Build the middleware registered as ``name`` in the ``reactor.middleware`` entry-point
    group (its factory is called with no argument; docs/observability.md, "Enabling it").

    Args:
        name: e.g. ``"otel"``.

    Returns:
        The middleware.

    Raises:
        ConfigurationError: no such name, a missing optional dependency (naming the extra),
            or a factory that did not return a :class:`reactor.middleware.Middleware`.
    """
    matches = [ep for ep in entry_points(group=MIDDLEWARE_GROUP) if ep.name == name]
    if not matches:
        known = sorted({ep.name for ep in entry_points(group=MIDDLEWARE_GROUP)})
        raise ConfigurationError(
            f"middleware: no middleware registered as {name!r} in {MIDDLEWARE_GROUP} "
            f"(registered: {', '.join(known) or 'none'})"
        )
    try:
        built = matches[0].load()()
    except ImportError as exc:
        raise ConfigurationError(
            f"middleware: {name!r} needs a missing dependency ({exc.name or exc}); install it "
            f"with: pip install -e '.[{name}]' in a reactor checkout (the distribution "
            f"reactor-saga[{name}])"
        ) from exc
    if not isinstance(built, Middleware):
        raise ConfigurationError(
            f"middleware: the factory registered as {name!r} returned "
            f"{type(built).__name__}, not a reactor.middleware.Middleware"
        )
    return built


def middleware_items(value: object) -> list[Middleware | str]:
    """Check a ``configure(middleware=...)`` argument (docs/observability.md, "Middleware").

    Args:
        value: a sequence of :class:`~reactor.middleware.Middleware` objects and registered
            names, or one comma-separated string of names (``-s middleware=otel,mine``).

    Returns:
        The middleware objects and names, in order (empty names of a string dropped).

    Raises:
        ConfigurationError: naming ``middleware[i]`` and what it got.
    """
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, Middleware) or not isinstance(value, Sequence):
        raise ConfigurationError(
            "configure(middleware=...) takes a list of reactor.middleware.Middleware objects "
            f"or registered names; got {type(value).__name__}"
        )
    items: list[Middleware | str] = []
    for index, item in enumerate(value):
        if not isinstance(item, Middleware | str) or (isinstance(item, str) and not item):
            raise ConfigurationError(
                f"middleware[{index}]: expected a reactor.middleware.Middleware or a "
                f"registered name, got {type(item).__name__} {item!r:.60}"
            )
        items.append(item)
    return items
