"""Every type a reactor definition can store is readable by any process that imported the
definition, before that process runs the reactor (docs/concepts.md, "Decisions").

The types a definition names (its inputs', its step classes' and async units', its composed
children's and map elements', its interrupt schemas') are registered with the codec
automatically; a process that only *reads* runs — ``Reactor.find``, ``undo``, ``retry``, the
CLI, the dashboard — must decode them too. Each check runs in a fresh interpreter that imports
:mod:`tests.engine.stored_types_reactors` and reads runs this process stored in a SQLite file
(the example adapter, examples/sqlite_adapter), so no registration of this process reaches it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactor import Failure, Paused, Success, config
from reactor.model import codec
from tests.engine.stored_types_reactors import (
    STORED_TYPES,
    Approval,
    Boxed,
    Line,
    Memo,
    Order,
    Packed,
    Parcel,
    Shop,
    Tier,
)

ROOT = Path(__file__).resolve().parents[2]

#: One value of each type :data:`STORED_TYPES` names.
SAMPLES = {
    "Order": Order(order_id="o-1"), "Tier": Tier.GOLD, "Line": Line("a"),
    "Parcel": Parcel(order_id="o-1"), "Packed": Packed("a"), "Boxed": Boxed("a"),
    "Memo": Memo("hi"), "Approval": Approval(approver="ann"),
}

_PRELUDE = (
    "import sys\n"
    "import reactor\n"
    "from reactor.model import codec\n"
    "from tests.engine.stored_types_reactors import STORED_TYPES, Shop\n"
    "reactor.configure(storage=sys.argv[1], router='inline://')\n"
)


@pytest.fixture
def storage_url(tmp_path: Path) -> Iterator[str]:
    """A SQLite file this process stores runs in (``inline://`` runs units and elements at
    once); the fresh interpreters open the same file."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    config.configure(storage=url, router="inline://")
    yield url
    config.reset()


def _in_fresh_process(storage_url: str, body: str, *args: str) -> str:
    """Run ``body`` after :data:`_PRELUDE` in a new interpreter; returns its stdout.

    Fails the test with the interpreter's stderr when it exits non-zero."""
    done = subprocess.run(
        [sys.executable, "-c", _PRELUDE + body, storage_url, *args],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _stored_run(*, fail: bool = False) -> str:
    """Run :class:`Shop` through its interrupt; returns the run id (completed, or failed and
    rolled back with ``fail=True``)."""
    paused = Shop.run(
        order=Order(order_id="o-1"), tier=Tier.GOLD, lines=[Line("a"), Line("b")], fail=fail
    )
    assert isinstance(paused, Paused) and paused.run_id is not None
    outcome = Shop.resume(paused.run_id, payload={"approver": "ann"})
    assert isinstance(outcome, Failure if fail else Success), outcome
    return paused.run_id


def test_find_reads_every_stored_type_in_a_fresh_process(storage_url: str) -> None:
    run_id = _stored_run()
    out = _in_fresh_process(storage_url, (
        "view = Shop.find(sys.argv[2])\n"
        "values = {\n"
        "    'Order': view.inputs['order'], 'Tier': view.results['charge'],\n"
        "    'Line': view.inputs['lines'][0], 'Parcel': view.children['ship'].inputs['parcel'],\n"
        "    'Packed': view.results['pack'][0], 'Boxed': list(view.results['box'])[0].value,\n"
        "    'Approval': view.results['approval'],\n"
        "}\n"
        "for name, value in sorted(values.items()):\n"
        "    print(name, type(value) is STORED_TYPES[name], repr(value))\n"
        "print(view.status.value)\n"
    ), run_id)
    lines = out.splitlines()
    assert lines[-1] == "completed"
    assert [line.split(" ", 2)[:2] for line in lines[:-1]] == [
        [name, "True"] for name in sorted(set(STORED_TYPES) - {"Memo"})
    ]


def test_undo_of_a_run_stored_by_another_process(storage_url: str) -> None:
    run_id = _stored_run()
    out = _in_fresh_process(storage_url, (
        "outcome = Shop.undo(sys.argv[2])\n"
        "print(type(outcome).__name__, Shop.find(sys.argv[2]).status.value)\n"
    ), run_id)
    assert out.split() == ["Success", "cancelled"]


def test_retry_of_a_run_stored_by_another_process(storage_url: str) -> None:
    run_id = _stored_run(fail=True)
    out = _in_fresh_process(storage_url, (
        "outcome = Shop.retry(sys.argv[2])\n"
        "print(type(outcome).__name__, Shop.find(outcome.run_id).inputs['order'].order_id)\n"
    ), run_id)
    assert out.split() == ["Paused", "o-1"]


@pytest.mark.parametrize("name", sorted(STORED_TYPES))
def test_a_value_of_each_type_the_definition_names_decodes_in_a_fresh_process(
    storage_url: str, name: str,
) -> None:
    assert set(SAMPLES) == set(STORED_TYPES)
    Shop.definition.register_codec_types()  # as this process's first run would
    # the only stored value the fresh process reads is this one: nothing else registers first
    out = _in_fresh_process(storage_url, (
        "value = codec.loads(sys.argv[2])\n"
        "print(type(value).__name__, type(value) is STORED_TYPES[type(value).__name__])\n"
    ), codec.dumps(SAMPLES[name]))
    assert out.split() == [name, "True"]
