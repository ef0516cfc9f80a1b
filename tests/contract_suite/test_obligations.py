"""The obligation catalogue is whole and every obligation is checked (docs/contract-suite.md,
"The obligation catalogue"; docs/obligations.md).

The catalogue numbers the promises of docs/protocol.md and docs/writing-an-adapter.md; each
contract test names the obligations it checks with the ``obligations`` marker. These tests keep
the three in step: no obligation without a test, no contract test without an obligation, no
marker naming an id the catalogue lacks, every source a real section of a real doc, and
docs/obligations.md generated from the catalogue as it is.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from reactor_contract.obligations import CATALOGUE, CONCERNS, Obligation, coverage, markdown

ROOT = Path(__file__).resolve().parents[2]
#: ``'docs/protocol.md, "Locks"'``: a doc and a heading of it.
_SOURCE = re.compile(r'^(?P<doc>docs/[\w./-]+\.md)(?:, "(?P<section>[^"]+)")?$')


def _collected() -> tuple[int, str]:
    """``reactor contract --obligations`` in a subprocess, from an empty directory."""
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys; from reactor_contract.cli import obligations; sys.exit(obligations())"],
        cwd=ROOT / "docs", capture_output=True, text=True, timeout=300, check=False,
    )
    return done.returncode, done.stdout + done.stderr


def _marked() -> dict[str, list[str]]:
    """``{node id: obligation ids}`` of every contract test, by collecting the suite here."""
    from reactor_contract.obligation_marks import marked_ids

    class Grab:
        def __init__(self) -> None:
            self.items: dict[str, list[str]] = {}

        def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
            self.items = {item.nodeid: marked_ids(item) for item in items}

    grab = Grab()
    code = pytest.main(
        ["--collect-only", "-q", "-p", "no:cacheprovider", "--pyargs", "reactor_contract"],
        plugins=[grab],
    )
    assert code == 0
    return grab.items


@pytest.fixture(scope="module")
def marked() -> dict[str, list[str]]:
    return _marked()


def test_the_catalogue_has_obligations_of_every_concern() -> None:
    concerns = {o.concern for o in CATALOGUE.values()}
    assert concerns == set(CONCERNS), sorted(set(CONCERNS) - concerns)
    assert len(CATALOGUE) >= 150


def test_every_obligation_is_checked_by_a_test(marked: dict[str, list[str]]) -> None:
    untested = [oid for oid, tests in coverage(marked).items() if not tests]
    assert untested == [], f"obligations no contract test names: {untested}"


def test_every_contract_test_names_what_it_checks(marked: dict[str, list[str]]) -> None:
    bare = [nodeid for nodeid, ids in marked.items() if not ids]
    assert bare == [], f"{len(bare)} contract tests name no obligation, e.g. {bare[:10]}"


def test_the_coverage_command_lists_every_obligation_and_passes() -> None:
    code, output = _collected()
    assert code == 0, output[-4000:]
    assert f"obligations: {len(CATALOGUE)}, untested: 0" in output
    for oid in CATALOGUE:
        assert re.search(rf"^{re.escape(oid)}\s", output, re.MULTILINE), oid


def test_every_source_is_a_section_of_a_doc() -> None:
    problems: list[str] = []
    for obligation in CATALOGUE.values():
        match = _SOURCE.match(obligation.source)
        if match is None:
            problems.append(f"{obligation.id}: source {obligation.source!r}")
            continue
        doc = ROOT / match["doc"]
        if not doc.is_file():
            problems.append(f"{obligation.id}: no {match['doc']}")
            continue
        section = match["section"]
        headings = {
            line.lstrip("#").strip().strip("`")
            for line in doc.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")
        }
        if section is not None and section not in headings and not any(
            heading.startswith(section) for heading in headings
        ):
            problems.append(f"{obligation.id}: {match['doc']} has no section {section!r}")
    assert problems == [], problems


def test_docs_obligations_md_is_generated_from_the_catalogue() -> None:
    stored = (ROOT / "docs" / "obligations.md").read_text(encoding="utf-8")
    assert stored == markdown(), (
        "docs/obligations.md is stale: python -m reactor_contract.obligations > "
        "docs/obligations.md"
    )


def test_probabilistic_checks_say_how_their_odds_are_made_overwhelming() -> None:
    for obligation in CATALOGUE.values():
        assert (obligation.checked == "probabilistic") == bool(obligation.how), obligation.id


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"id": "O-locks-0"}, "is not O-<concern>-<n>"),
        ({"id": "O-nonsense-1"}, "is not O-<concern>-<n>"),
        ({"id": "locks-1"}, "is not O-<concern>-<n>"),
        ({"statement": " "}, "a statement and a docs/ source"),
        ({"source": "protocol.md"}, "a statement and a docs/ source"),
        ({"checked": "probabilistic"}, "explains the odds"),
        ({"how": "many rounds"}, "explains the odds"),
    ],
)
def test_a_malformed_obligation_is_refused_with_the_field(
    fields: dict[str, str], problem: str
) -> None:
    base = {"id": "O-locks-1", "statement": "s", "source": 'docs/protocol.md, "Locks"'}
    with pytest.raises(ValueError, match=re.escape(problem)):
        Obligation(**{**base, **fields})  # type: ignore[arg-type]


def test_a_marker_naming_an_unknown_obligation_fails_collection(tmp_path: Path) -> None:
    module = tmp_path / "test_stray.py"
    module.write_text(
        "import pytest\n\n"
        "@pytest.mark.obligations('O-locks-999')\n"
        "def test_stray():\n    assert True\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(module),
         "--reactor-storage=memory://"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 4, done.stdout + done.stderr
    assert "O-locks-999" in done.stdout + done.stderr
