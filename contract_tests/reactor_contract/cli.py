"""``reactor contract``: run the contract suite against a storage and a router by URL.

The lead's :mod:`reactor.cli` wires ``reactor contract --storage URL --router URL [PYTEST ARGS]``
to :func:`run`. It is the same as::

    pytest --pyargs reactor_contract --reactor-storage=URL --reactor-router=URL [PYTEST ARGS]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import pytest

from reactor import config
from reactor.model.errors import ConfigurationError

__all__ = ["pytest_arguments", "run", "validate_urls"]


def pytest_arguments(
    storage_url: str | None, router_url: str | None, pytest_args: Sequence[str] = ()
) -> list[str]:
    """The pytest command line of a contract run.

    Args:
        storage_url: the storage URL (``None``: storage tests skip).
        router_url: the router URL (``None``: router tests skip).
        pytest_args: extra pytest arguments, appended (``-x``, ``-k locks``, ``-q``...).

    Returns:
        Arguments for :func:`pytest.main`. ``-p reactor_contract.plugin`` is added only when
        plugin autoloading is disabled (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``); otherwise the
        ``pytest11`` entry point loads it and adding it again would register it twice.
    """
    args = ["--pyargs", "reactor_contract"]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        args = ["-p", "reactor_contract.plugin", *args]
    if storage_url:
        args.append(f"--reactor-storage={storage_url}")
    if router_url:
        args.append(f"--reactor-router={router_url}")
    return [*args, *pytest_args]


def run(storage_url: str | None, router_url: str | None, pytest_args: Sequence[str] = ()) -> int:
    """Run the contract suite in this process and return pytest's exit code.

    Args:
        storage_url: e.g. ``"memory://"`` or ``"sqlite:///tmp/x.db"``.
        router_url: e.g. ``"local://"``.
        pytest_args: extra pytest arguments.

    Returns:
        0 when every selected contract test passed (skips included), else pytest's exit code
        (1 failures, 2 interrupted, 4 usage error, 5 nothing collected); 2 without running
        pytest when a URL cannot be built (:func:`validate_urls`, one line on stderr).

    Raises:
        ValueError: neither URL was given (the run would only skip).
    """
    if not storage_url and not router_url:
        raise ValueError("give a storage URL, a router URL, or both")
    problem = validate_urls(storage_url, router_url)
    if problem is not None:
        print(f"reactor contract: {problem}", file=sys.stderr)
        return 2
    return int(pytest.main(pytest_arguments(storage_url, router_url, pytest_args)))


def validate_urls(storage_url: str | None, router_url: str | None) -> str | None:
    """Build (and close) the storage and the router once through :mod:`reactor.config`.

    A URL with an unknown scheme, a missing optional dependency or a bad option is reported
    before pytest starts, instead of failing every contract test with the same traceback.

    Args:
        storage_url: the storage URL, or ``None``.
        router_url: the router URL, or ``None``.

    Returns:
        ``None`` when both build, else a one-line description of the first problem.
    """
    builders = (("storage", storage_url, config.storage_from_url),
                ("router", router_url, config.router_from_url))
    for role, url, build in builders:
        if not url:
            continue
        try:
            adapter = build(url)
        except ConfigurationError as exc:
            return f"bad {role} URL {url!r}: {exc}"
        try:
            adapter.close()
        except Exception:  # closing a probe connection is best effort
            pass
    return None
