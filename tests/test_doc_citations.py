"""Every place the code or the docs cite a document points into the repository
(docs/architecture.md).

Code, tests and adapters cite the in-repo docs as ``docs/<page>.md``, ``docs/<page>.md#anchor``
or ``docs/<page>.md, "Section"``. A citation whose page, anchor or section does not exist is a
dead end for a maintainer, so it fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("reactor", "adapters", "contract_tests", "examples", "tests")

# docs/page.md, optionally #anchor, optionally followed by `, "Section"` / `("Section")`.
CITATION = re.compile(
    r'(docs/[A-Za-z0-9_./-]+\.md)(?:#([A-Za-z0-9_-]+))?(?:[`]?\s*(?:,|\(|§)\s*"([^"\n]+)")?'
)


def _slug(heading: str) -> str:
    """The GitHub-style anchor of a Markdown heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _headings(page: Path) -> list[str]:
    return [
        line.lstrip("#").strip()
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    ]


def _labels(page: Path) -> list[str]:
    """The bold labels that open a list item (``* **Composed children resume.** ...``): the
    pages name their rules this way, and code cites them like sections."""
    return re.findall(r"^\s*[-*] \*\*([^*]+)\*\*", page.read_text(encoding="utf-8"), re.M)


def _plain(text: str) -> str:
    return text.replace("`", "").lower()


def _cited_files() -> list[Path]:
    files = [path for source in SOURCES for path in sorted((ROOT / source).rglob("*.py"))]
    files += [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in files if ".venv" not in p.parts and p != Path(__file__).resolve()]


def _citations() -> list[tuple[str, str, str | None, str | None]]:
    found = []
    for path in _cited_files():
        text = path.read_text(encoding="utf-8")
        for match in CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(ROOT)}:{line}"
            found.append((where, match.group(1), match.group(2), match.group(3)))
    return found


def test_the_citation_pattern_reads_pages_anchors_and_sections() -> None:
    sample = 'see docs/protocol.md#locks and (docs/workers.md, "Dead letters")'
    matches = [m.groups() for m in CITATION.finditer(sample)]
    assert matches == [("docs/protocol.md", "locks", None),
                       ("docs/workers.md", None, "Dead letters")]


def test_every_cited_page_anchor_and_section_exists() -> None:
    citations = _citations()
    assert len(citations) > 200  # the scan read the code
    broken = []
    for where, page, anchor, section in citations:
        doc = ROOT / page
        if not doc.is_file():
            broken.append(f"{where}: {page} does not exist")
            continue
        headings = _headings(doc)
        if anchor is not None and anchor not in {_slug(h) for h in headings}:
            broken.append(f"{where}: {page} has no heading with anchor #{anchor}")
        if section is not None and not any(
            _plain(section) in _plain(h) for h in headings + _labels(doc)
        ):
            broken.append(f'{where}: {page} has no section "{section}"')
    assert broken == [], "dead citations:\n" + "\n".join(broken)
