"""What the two releases of the rolling-deploy test share (tests/kill/deploy_v1.py,
tests/kill/deploy_v2.py): the reactor names and the journal of step bodies (docs/deploys.md,
"Routing by version"). Importing it registers no reactor."""

from __future__ import annotations

import os
from typing import Any

from tests.kill.reactors import record

__all__ = ["COMPATIBLE", "INCOMPATIBLE", "journal"]

#: v2 renames this reactor's completed first step: v2 cannot continue its v1 runs.
INCOMPATIBLE = "tests.deploy.incompatible"
#: v2 adds a step at the end of this one: either release continues its runs.
COMPATIBLE = "tests.deploy.compatible"


def journal(release: str, reactor: str, what: str, inputs: Any, ctx: Any) -> None:
    """Append ``<release> <reactor> <what> <run id>`` to this process's journal file,
    ``<inputs.journal>/<release>-<pid>.log``."""
    record(os.path.join(inputs.journal, f"{release}-{os.getpid()}.log"),
           f"{release} {reactor} {what} {ctx.run_id}")
