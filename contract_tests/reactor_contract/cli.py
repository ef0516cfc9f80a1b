"""``reactor contract``: run the contract suite against a storage and a router by URL.

The lead's :mod:`reactor.cli` wires ``reactor contract --storage URL --router URL [PYTEST ARGS]``
to :func:`run`. It is the same as::

    pytest --pyargs reactor_contract --reactor-storage=URL --reactor-router=URL [PYTEST ARGS]

The suite runs on pytest and hypothesis, which the ``reactor-saga[contract]`` extra installs
(docs/contract-suite.md); this module imports without them, and :func:`run` names the extra
when one is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Sequence

from reactor.errors import ConfigurationError

try:
    import pytest
except ImportError:  # reported by run() through missing_dependencies()
    pytest = None  # type: ignore[assignment]

__all__ = [
    "CONTRACT_DEPENDENCIES",
    "CONTRACT_EXTRA",
    "EXIT_CERTIFIED",
    "EXIT_GAPS",
    "exit_code",
    "install_hint",
    "missing_dependencies",
    "obligations",
    "pytest_arguments",
    "run",
    "validate_urls",
]

#: The distribution extra that installs what the contract suite needs.
CONTRACT_EXTRA = "reactor-saga[contract]"

#: ``reactor contract``'s exit code when the adapter is certified.
EXIT_CERTIFIED = 0
#: ``reactor contract``'s exit code when it is certified with declared gaps (optional
#: capabilities skipped); a failure is 1 (docs/contract-suite.md, "Verdicts").
EXIT_GAPS = 6

#: The modules the contract suite imports beyond reactor itself.
CONTRACT_DEPENDENCIES: tuple[str, ...] = ("pytest", "hypothesis")


def missing_dependencies() -> list[str]:
    """The :data:`CONTRACT_DEPENDENCIES` that cannot be imported here.

    Returns:
        Their module names, in :data:`CONTRACT_DEPENDENCIES` order (empty when all are there).
    """
    return [name for name in CONTRACT_DEPENDENCIES if importlib.util.find_spec(name) is None]


def install_hint(missing: Sequence[str]) -> str:
    """One line naming what is missing and the extra that installs it
    (docs/contract-suite.md).

    Args:
        missing: module names, e.g. ``["hypothesis"]``.

    Returns:
        e.g. ``"the contract suite needs hypothesis, which is not installed: pip install
        'reactor-saga[contract]' (from a checkout: pip install -e '.[contract]')"``.
    """
    return (
        f"the contract suite needs {' and '.join(missing)}, which "
        f"{'is' if len(missing) == 1 else 'are'} not installed: pip install "
        f"'{CONTRACT_EXTRA}' (from a checkout: pip install -e '.[contract]')"
    )


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


def run(
    storage_url: str | None,
    router_url: str | None,
    pytest_args: Sequence[str] = (),
    *,
    json_path: str | None = None,
) -> int:
    """Run the contract suite in this process and return the verdict's exit code.

    Args:
        storage_url: e.g. ``"memory://"`` or ``"sqlite:///tmp/x.db"``.
        router_url: e.g. ``"local://"``.
        pytest_args: extra pytest arguments.
        json_path: where to write the conformance table and verdict as JSON
            (``--reactor-json``; docs/contract-suite.md, "Verdicts").

    Returns:
        :data:`EXIT_CERTIFIED` (0) when the verdict is "certified";
        :data:`EXIT_GAPS` (6) when it is "certified with declared gaps" (optional
        capabilities skipped, listed under the table); 1 when it is "failed" (a test failed or
        a mandatory concern skipped); pytest's other codes as they are (2 interrupted, 4 usage
        error, 5 nothing collected); 2 without running pytest when pytest or hypothesis is
        missing (:func:`install_hint`) or a URL cannot be built (:func:`validate_urls`), with
        one line on stderr.

    Raises:
        ValueError: neither URL was given (the run would only skip).
    """
    if not storage_url and not router_url:
        raise ValueError("give a storage URL, a router URL, or both")
    missing = missing_dependencies()
    if missing or pytest is None:
        print(f"reactor contract: {install_hint(missing or ['pytest'])}", file=sys.stderr)
        return 2
    problem = validate_urls(storage_url, router_url)
    if problem is not None:
        print(f"reactor contract: {problem}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="reactor-contract-") as scratch:
        target = json_path or os.path.join(scratch, "verdict.json")
        args = [*pytest_arguments(storage_url, router_url, pytest_args), f"--reactor-json={target}"]
        code = int(pytest.main(args))
        return exit_code(code, target)


def obligations(pytest_args: Sequence[str] = ()) -> int:
    """Print which contract tests check each obligation of the catalogue, without running any
    (``reactor contract --obligations``; docs/contract-suite.md, "The obligation catalogue").

    Args:
        pytest_args: extra pytest arguments (``-k locks`` narrows the tests counted).

    Returns:
        0 when every obligation is checked by a test, 1 when one is not, pytest's other codes
        as they are; 2 when pytest or hypothesis is missing (one line on stderr).
    """
    missing = missing_dependencies()
    if missing or pytest is None:
        print(f"reactor contract: {install_hint(missing or ['pytest'])}", file=sys.stderr)
        return 2
    args = [*pytest_arguments(None, None, ()), "--collect-only", "-q", "-p", "no:cacheprovider",
            "--reactor-obligations", *pytest_args]
    return int(pytest.main(args))


def exit_code(pytest_code: int, json_path: str) -> int:
    """The command's exit code from pytest's and the verdict written to ``json_path``.

    Returns:
        pytest's code unless it is 0; then :data:`EXIT_GAPS` for "certified with declared
        gaps", 1 for "failed", 0 for "certified" (or when no verdict was written).
    """
    if pytest_code != 0:
        return pytest_code
    try:
        with open(json_path, encoding="utf-8") as source:
            verdict = json.load(source).get("verdict")
    except (OSError, ValueError):
        return pytest_code
    if verdict == "failed":
        return 1
    return EXIT_GAPS if verdict == "certified with declared gaps" else EXIT_CERTIFIED


def validate_urls(storage_url: str | None, router_url: str | None) -> str | None:
    """Build (and close) the storage and the router once through :mod:`reactor.config`.

    A URL with an unknown scheme, a missing optional dependency or a bad option is reported
    before pytest starts, instead of failing every contract test with the same traceback. Each
    is built in a namespace of the suite's own (a ``?prefix=``), emptied through its probe
    before it is closed, so the check leaves nothing behind either (no queue or collection
    created under the URL's own namespace; docs/contract-suite.md, "Cleanup: nothing left
    behind").

    Args:
        storage_url: the storage URL, or ``None``.
        router_url: the router URL, or ``None``.

    Returns:
        ``None`` when both build, else a one-line description of the first problem.
    """
    from reactor_contract.plugin import forget_namespaces, open_router, open_storage, purge_live

    builders = (("storage", storage_url, open_storage), ("router", router_url, open_router))
    for role, url, build in builders:
        if not url:
            continue
        try:
            adapter = build(url)
        except ConfigurationError as exc:
            return f"bad {role} URL {url!r}: {exc}"
        try:
            purge_live(role, url, adapter)
        except Exception:  # no probe for the scheme: the contract tests will say so
            pass
        finally:
            forget_namespaces()
            try:
                adapter.close()
            except Exception:  # closing a probe connection is best effort
                pass
    return None
