"""scripts/mutation's bookkeeping: the triage file, the committed verdict journals, and the rules
that leave a mutant out (docs/contract-suite.md, "Mutation testing of our own adapters")."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mutation() -> Iterator[ModuleType]:
    loader = importlib.machinery.SourceFileLoader("reactor_mutation_script",
                                                  str(ROOT / "scripts" / "mutation"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # dataclasses look their module up
    try:
        loader.exec_module(module)
        yield module
    finally:
        del sys.modules[loader.name]


@pytest.mark.parametrize(("line", "marker"), [
    ("    *,", True),
    ("def f(self, *, a: int) -> None:", True),
    ("def f(*, a: int) -> None:", True),
    ("    self, head: Mapping[str, Any], *, due: bool", True),
    ("x = a * b", False),
    ("f(*args)", False),
    ("def f(**kwargs):", False),
    ("return [*items, last]", False),
])
def test_a_keyword_only_marker_is_told_from_a_multiplication(
    mutation: ModuleType, line: str, marker: bool
) -> None:
    column = line.index("*")
    assert mutation._is_keyword_marker(line, (1, column)) is marker


def test_the_journal_keeps_the_oracles_marker_and_a_survivors_diff_only(
    mutation: ModuleType,
) -> None:
    own = mutation._OWN_TESTS
    long_output = own + "\n" + "x" * 5000 + "FAILED tests/t.py::test_it"
    kept = mutation._abridged({"test_outcome": "killed", "output": long_output, "diff": "d"})
    assert kept["output"].startswith(own) and kept["output"].endswith("FAILED tests/t.py::test_it")
    assert len(kept["output"]) < 400 and kept["diff"] is None
    survivor = mutation._abridged({"test_outcome": "survived", "output": "ok", "diff": "d"})
    assert survivor == {"test_outcome": "survived", "output": "ok", "diff": "d"}


def test_every_equivalent_mutant_in_the_triage_file_has_a_reason_and_a_module() -> None:
    triage = tomllib.loads((ROOT / "mutation" / "triage.toml").read_text(encoding="utf-8"))
    for entry in triage.get("equivalent", []):
        module, operator, line = (part.strip() for part in entry["mutant"].split(" :: ", 2))
        assert (ROOT / module).is_file(), entry["mutant"]
        assert operator.startswith("core/") and line, entry["mutant"]
        assert len(entry["reason"].strip()) > 10, entry["mutant"]


def test_every_committed_verdict_names_its_mutant_and_outcome() -> None:
    journals = sorted((ROOT / "mutation" / "results").glob("*.jsonl"))
    assert journals, "no verdict journal is committed"
    for journal in journals:
        for number, line in enumerate(journal.read_text(encoding="utf-8").splitlines(), 1):
            verdict = json.loads(line)
            where = f"{journal.name}:{number}"
            assert " :: " in verdict["mutant"], where
            assert verdict["test_outcome"] in ("killed", "survived", None), where
            assert verdict["worker_outcome"] in ("normal", "exception", "abnormal", "skipped",
                                                 "no-test"), where


def test_the_sample_order_is_a_stable_hash_order(mutation: ModuleType) -> None:
    keys = [f"reactor/memory/queue.py:{n}:NumberReplacer" for n in range(200)]
    ranked = sorted(keys, key=mutation.sample_rank)
    assert ranked == sorted(reversed(keys), key=mutation.sample_rank)  # input order is moot
    assert ranked != keys  # not the source order: a prefix is a spread sample
    first_half = {int(k.split(":")[1]) for k in ranked[:100]}
    assert min(first_half) < 20 and max(first_half) > 180


def test_the_sample_interval_is_wilsons(mutation: ModuleType) -> None:
    low, high = mutation.wilson(90, 100)
    assert (round(low, 3), round(high, 3)) == (0.826, 0.945)
    assert mutation.wilson(0, 0) == (0.0, 1.0)
    low, high = mutation.wilson(300, 300)
    assert high == pytest.approx(1.0) and 0.98 < low < 0.99


def test_a_survivor_the_own_tests_have_not_judged_is_reported_apart(
    mutation: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A contract survivor whose own-tests verdict is missing (``--rejudge-own`` forgot it and
    the run stopped before judging it again) awaits the own tests: it is neither a survivor nor
    in the sample; one the own tests certified is a new survivor; a triaged one is equivalent."""
    work_db = pytest.importorskip("cosmic_ray.work_db")
    work_item = pytest.importorskip("cosmic_ray.work_item")
    own = mutation._OWN_TESTS
    verdicts = {  # job id: (outcome, output)
        "killed": ("killed", "F"),
        "judged": ("survived", f"{own}\n3 passed"),
        "forgotten": ("survived", "[the contract suite certified it]"),
        "uncovered": ("survived", mutation._UNCOVERED),
        "triaged": ("survived", "[the contract suite certified it]"),
    }
    db_path = tmp_path / "memory.sqlite"
    with work_db.use_db(str(db_path), work_db.WorkDB.Mode.create) as db:
        for row, (job, (outcome, output)) in enumerate(verdicts.items(), 1):
            db.add_work_item(work_item.WorkItem.single(job, work_item.MutationSpec(
                "reactor/generic/maps.py", "core/NumberReplacer", 0, (row, 0), (row, 1))))
            db.set_result(job, work_item.WorkResult(
                worker_outcome=work_item.WorkerOutcome.NORMAL, output=output,
                test_outcome=work_item.TestOutcome(outcome)))
    monkeypatch.setattr(mutation, "mutant_keys", lambda _db: {job: job for job in verdicts})
    monkeypatch.setattr(mutation, "load_triage", lambda: {"triaged": "no behaviour differs"})
    order = ["killed", "triaged", "judged", "forgotten", "uncovered"]
    monkeypatch.setattr(mutation, "sample_rank", order.index)  # the sample order
    found = mutation.report("memory", db_path)
    assert [s["mutant"] for s in found["new_survivors"]] == ["judged"]
    assert found["awaiting_own_tests"] == ["forgotten", "uncovered"]
    assert (found["killed"], found["survived"], found["equivalent"]) == (1, 1, 1)
    sample = found["sample"]  # the judged prefix ends where "forgotten" awaits its judgement
    assert (sample["mutants"], sample["killed"], sample["survived"], sample["equivalent"]) == (
        3, 1, 1, 1)
