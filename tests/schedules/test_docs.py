"""The examples of docs/schedules.md, "Schedules", run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reactor import config
from reactor.schedules import declared

DOC = Path(__file__).resolve().parents[2] / "docs" / "schedules.md"


def _schedule_blocks() -> list[str]:
    text = DOC.read_text()
    section = text[text.index("\n## Schedules\n"):]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


@pytest.mark.parametrize("block", range(2))
def test_the_examples_of_the_schedules_section_run(block: int) -> None:
    blocks = _schedule_blocks()
    assert len(blocks) == 2
    try:
        exec(compile(blocks[block], f"docs/schedules.md[schedules {block}]", "exec"),
             {"__name__": "docs"})
    finally:
        config.reset()
    assert "hourly-cleanup" not in declared()
