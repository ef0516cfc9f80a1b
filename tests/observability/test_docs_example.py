"""The console example of docs/observability.md ("Enabling it") runs as written and prints what
the page says: the spans of one failed, rolled-back run, then its metrics, and no secret."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "observability.md"


def _console_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    return next(block for block in blocks if "ConsoleSpanExporter" in block)


def test_the_console_example_prints_one_trace_and_the_metrics(tmp_path: Path) -> None:
    script = tmp_path / "payment_traced.py"
    script.write_text(_console_example(), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "tok_visa" not in out
    assert "voided auth-1" in out and "\nFalse\n" in f"\n{out}"
    names = re.findall(r'^    "name": "([^"]+)"', out, re.MULTILINE)
    assert names == ["step authorize", "step capture", "compensate capture", "undo authorize",
                     "rollback docs.payment", "run docs.payment"]
    traces = set(re.findall(r'"trace_id": "(0x[0-9a-f]+)"', out))
    assert len(traces) == 1
    metrics = json.loads(out[out.index('{\n    "resource_metrics"'):])
    found = {m["name"] for rm in metrics["resource_metrics"] for sm in rm["scope_metrics"]
             for m in sm["metrics"]}
    assert {"reactor.runs.started", "reactor.runs.finished", "reactor.step.duration",
            "reactor.rollbacks"} <= found
