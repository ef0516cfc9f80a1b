"""``reactor contract``: run the shared contract suite against an adapter chosen by URL
(docs/contract-suite.md).

The suite needs pytest and hypothesis (the ``reactor-saga[contract]`` extra): when one is
missing the command exits 2 with one stderr line naming the extra, before running anything.
"""

from __future__ import annotations

from typing import Annotated

import typer

from reactor.cli._common import EXIT_USAGE, app, fail

__all__ = ["contract"]


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def contract(
    ctx: typer.Context,
    storage: Annotated[
        str | None, typer.Option("--storage", help="Storage URL under test.")
    ] = None,
    router: Annotated[
        str, typer.Option("--router", help="Router URL under test.")
    ] = "local://?visibility_timeout=1",
    json_path: Annotated[
        str | None,
        typer.Option("--json", help="Write the conformance table and verdict to this file."),
    ] = None,
    obligations: Annotated[
        bool,
        typer.Option(
            "--obligations",
            help="Print which tests check each obligation (docs/obligations.md); run nothing.",
        ),
    ] = False,
) -> None:
    r"""Run the shared contract suite against an adapter; extra arguments go to pytest.

    Exit status: 0 certified, 6 certified with declared gaps (missing capabilities, listed
    under the table; a test skipped because the adapter is stronger than its premise is not
    a gap), 1 failed (docs/contract-suite.md, "Verdicts"). The run deletes what it wrote
    (docs/contract-suite.md, "Cleanup: nothing left behind"). Needs the contract extra,
    reactor-saga\[contract] (pytest, hypothesis). ``--obligations`` needs no URL: it lists,
    per obligation, the tests that check it and exits 1 when one is checked by none
    (docs/contract-suite.md, "The obligation catalogue").
    """
    if not obligations and not storage:
        fail("give --storage URL (or --obligations)", EXIT_USAGE)
    try:
        from reactor_contract.cli import (  # deferred: needs the optional pytest/hypothesis
            install_hint,
            missing_dependencies,
            run,
        )
        from reactor_contract.cli import (  # deferred: needs the optional pytest/hypothesis
            obligations as obligation_coverage,
        )
    except ImportError as exc:  # the contract package ships with reactor; be explicit anyway
        fail(
            f"the contract suite cannot be imported ({exc}); reinstall reactor with its "
            "contract extra: pip install 'reactor-saga[contract]'",
            EXIT_USAGE,
        )
    missing = missing_dependencies()
    if missing:
        fail(install_hint(missing), EXIT_USAGE)
    if obligations:
        raise typer.Exit(obligation_coverage(list(ctx.args)))
    raise typer.Exit(run(storage, router, list(ctx.args), json_path=json_path))
