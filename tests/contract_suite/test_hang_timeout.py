"""The per-test hang guard scales with the backend (docs/contract-suite.md, "Per-test timeout"):
scripts/test gives the contract runs on the Python test servers (SecantusDB, moto) a larger
budget than the 60 s default, which they tripped under load."""

from __future__ import annotations

import re
from pathlib import Path

from reactor_contract._timeout import DEFAULT_TEST_TIMEOUT, ContractTimeout

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test"


def _contract_runs() -> list[str]:
    text = SCRIPT.read_text()
    block = text[text.index("PYTEST_RUNS=(") : text.index("\n)\n", text.index("PYTEST_RUNS=("))]
    return [line.strip() for line in block.splitlines() if "--pyargs reactor_contract" in line]


def test_the_python_test_servers_get_a_larger_hang_timeout() -> None:
    slow = [run for run in _contract_runs() if "MONGODB_WIRE_URL" in run or "MOTO_URL" in run]
    assert len(slow) == 2, slow  # SecantusDB, and DynamoDB + SQS on moto
    for run in slow:
        found = re.search(r"--reactor-test-timeout=(\d+)", run)
        assert found and float(found.group(1)) >= 4 * DEFAULT_TEST_TIMEOUT, run


def test_the_timeout_message_says_how_to_give_a_slow_backend_more_time() -> None:
    text = ContractTimeout(60).message("reactor_contract/test_x.py::T::test_y", "call")
    assert "did not finish its call within 60s" in text
    assert "give a larger --reactor-test-timeout" in text
