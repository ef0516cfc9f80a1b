"""The types nested in a dataclass ``Input`` type (its fields' enums, dataclasses and models,
through containers, self-references included) are registered with the codec like the input type
itself: a run with such an input is stored, and a fresh process that imported the reactor reads
it (docs/concepts.md, "Decisions")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from reactor import Success
from reactor.dsl.inputs import codec_types
from reactor.model import codec
from tests.dsl.nested_types_reactors import Address, Line, Node, Shipment, Shipping, Speed

ROOT = Path(__file__).resolve().parents[2]

SHIPMENT = Shipment(
    speed=Speed.EXPRESS, lines=[Line("a", Speed.EXPRESS)], address=Address(city="Oslo"),
    route={"hub": Node("hub", Node("root"))},
)


def test_the_walk_names_every_nested_type_once_and_stops_on_self_references() -> None:
    assert set(codec_types(Shipment)) == {Shipment, Speed, Line, Address, Node}


def test_a_run_with_a_nested_dataclass_input_is_stored_and_read_back() -> None:
    outcome = Shipping.run(shipment=SHIPMENT)
    assert isinstance(outcome, Success), outcome
    assert outcome.value == SHIPMENT
    view = Shipping.find(outcome.run_id or "")
    assert view.inputs["shipment"] == SHIPMENT and view.results["keep"] == SHIPMENT


def test_a_fresh_process_that_imported_the_reactor_reads_the_nested_types() -> None:
    Shipping.definition.register_codec_types()  # as this process's first run would
    text = codec.dumps(SHIPMENT)
    done = subprocess.run(
        [sys.executable, "-c", (
            "import sys\n"
            "from reactor.model import codec\n"
            "from tests.dsl import nested_types_reactors as m\n"
            "value = codec.loads(sys.argv[1])\n"
            "print(type(value) is m.Shipment, type(value.lines[0]) is m.Line,\n"
            "      value.speed is m.Speed.EXPRESS, type(value.route['hub'].parent) is m.Node)\n"
        ), text],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True", "True"]
