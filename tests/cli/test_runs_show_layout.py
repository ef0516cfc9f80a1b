"""``reactor runs show`` (text mode) keeps the indented JSON layout while escaping hostile text
inside the values (docs/workers.md, "Dead letters"; reactor/cli/runs.py)."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import Input, Reactor, config, input, step
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.cli.runs import terminal_json
from reactor.config import Runtime
from reactor.memory import InlineRouter, ManualClock, MemoryStorage

#: A value with a line feed, a carriage return, an ANSI escape, DEL, a C1 control, a bidi
#: override, a zero-width space and a line separator.
HOSTILE = "first\nforged line\r\x1b[31mred\x7f\x85\u202eevil\u200b\u2028end"


class Noting(Reactor, name="test_cli_runs_show_layout.noting"):
    note = Input(str)

    @step(note=input("note"))
    def keep(inputs: Any, ctx: Any) -> str:
        return str(inputs.note)


@pytest.fixture
def rt(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    runtime = config.configure(
        storage=MemoryStorage(clock=ManualClock(1_700_000_000.0)), router=InlineRouter()
    )
    monkeypatch.setattr(runs_cli, "_runtime", lambda storage, router, setting=None: runtime)
    yield runtime
    config.reset()


def _unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal must not receive raw (every control and format
    character, line/paragraph separators, surrogates), the layout's line feeds excepted."""
    return [
        ch for ch in text
        if ch != "\n" and unicodedata.category(ch) in {"Cc", "Cf", "Zl", "Zp", "Cs"}
    ]


def test_runs_show_prints_indented_json_with_the_values_escaped(rt: Runtime) -> None:
    run_id = Noting.run(note=HOSTILE).run_id or ""
    runner = CliRunner()
    as_json = runner.invoke(app, ["runs", "show", run_id, "--json"])
    pretty = runner.invoke(app, ["runs", "show", run_id])
    assert as_json.exit_code == 0 and pretty.exit_code == 0, pretty.output
    expected = json.loads(as_json.stdout)
    assert expected["document"]["inputs"]["note"] == HOSTILE

    lines = pretty.stdout.splitlines()  # also splits at \x85 and \u2028: none may be left
    assert len(lines) == as_json.stdout.count("\n") > 10  # one line per JSON member
    assert lines[0] == "{" and lines[1].startswith('  "context_id": ')
    assert _unsafe(pretty.stdout) == []  # nothing raw reaches the terminal
    assert json.loads(pretty.stdout) == expected  # escaped in JSON's syntax: the same JSON
    notes = [line.strip() for line in lines if line.lstrip().startswith('"note": ')]
    assert notes and set(notes) == {  # the input, and the step's stored arguments
        '"note": "first\\nforged line\\r\\u001b[31mred\\u007f\\u0085\\u202eevil\\u200b'
        '\\u2028end"'
    }


def test_terminal_json_keeps_line_feeds_of_the_layout_only() -> None:
    text = json.dumps({"a": ["x\ny", "\u202e"]}, ensure_ascii=False, indent=2)
    shown = terminal_json(text)
    assert shown.splitlines() == [
        "{", '  "a": [', '    "x\\ny",', '    "\\u202e"', "  ]", "}",
    ]
    assert json.loads(shown) == {"a": ["x\ny", "\u202e"]}
