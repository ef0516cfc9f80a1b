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


PROBE_CONFTEST = '''
import signal

import pytest

from reactor_contract._timeout import ContractTimeout

armed = []


class Probe:
    """A wrapper registered before the guard, as pytest's capture and logging wrappers are."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        armed.append(signal.getitimer(signal.ITIMER_REAL)[0] > 0)
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        armed.append(signal.getitimer(signal.ITIMER_REAL)[0] > 0)
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        armed.append(signal.getitimer(signal.ITIMER_REAL)[0] > 0)
        return (yield)


def pytest_configure(config):
    config.pluginmanager.register(Probe(), "probe")
    config.pluginmanager.register(ContractTimeout(30), "contract-timeout")


def pytest_sessionfinish(session):
    print("PROBES", len(armed), "ARMED" if any(armed) else "UNARMED")
'''


def test_the_alarm_never_covers_pytest_s_own_wrappers(tmp_path: Path) -> None:
    """The guard's wrappers are the innermost: a wrapper registered before it (pytest's output
    capture is one) runs with no alarm armed. When the guard was the outermost, an alarm (a
    used-up budget gives the teardown 1 ms) fired inside the capture wrapper under load and
    left the output redirected: the hanging-adapter test saw only ".F" of the report."""
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text(PROBE_CONFTEST)
    (tmp_path / "test_probe.py").write_text("def test_one():\n    assert True\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PROBES 3 UNARMED" in done.stdout, done.stdout
