"""The pytest plugin: installed through the ``pytest11`` entry point, its ``reactor_env``
fixture restores the previous runtime, and tests that do not use it are left alone.

Each scenario runs in its own pytest process (the plugin is loaded the way a user's project
loads it: from the installed entry point).
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from reactor import config
from reactor.testing import TestEnvironment

SCENARIO = '''
import sys

from reactor import config
from reactor.memory import LocalRouter, MemoryStorage
from reactor.ports import SYSTEM_CLOCK


class RecordingRouter(LocalRouter):
    closed = False

    def close(self):
        self.closed = True
        super().close()


PREVIOUS = config.configure(storage=MemoryStorage(), router=RecordingRouter(workers=0))


def test_1_without_the_fixture_nothing_changes():
    assert "reactor.testing.environment" not in sys.modules  # not even imported
    assert config.current() is PREVIOUS
    assert PREVIOUS.clock is SYSTEM_CLOCK


def test_2_with_the_fixture_an_isolated_runtime(reactor_env):
    assert config.current() is reactor_env.runtime
    assert reactor_env.runtime is not PREVIOUS
    assert reactor_env.runtime.clock is reactor_env.clock  # the engine waits on the test clock


def test_3_afterwards_the_previous_runtime_is_back_untouched():
    assert config.current() is PREVIOUS
    assert not PREVIOUS.router.closed
    assert config.current().clock is SYSTEM_CLOCK
'''


def test_the_plugin_is_an_installed_pytest11_entry_point() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert found.get("reactor_testing") == "reactor.testing.plugin"


def test_the_fixture_restores_the_previous_runtime_and_leaves_other_tests_alone(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_scenario.py").write_text(SCENARIO, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
         "--rootdir", str(tmp_path), "-p", "no:randomly", str(tmp_path / "test_scenario.py")],
        capture_output=True, text=True, timeout=240, cwd=tmp_path, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b3 passed\b", done.stdout), done.stdout


def test_the_fixture_in_this_process(reactor_env: TestEnvironment) -> None:
    assert isinstance(reactor_env, TestEnvironment)
    assert config.current() is reactor_env.runtime


