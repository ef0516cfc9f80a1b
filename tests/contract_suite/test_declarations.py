"""Every declaration an adapter can make is checked by the contract suite, or says why it cannot
be (docs/contract-suite.md, "Declarations are checked"): a new ``Capabilities`` field or
capability protocol cannot be added without naming the test that holds adapters to it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect

import pytest
from reactor_contract import test_declarations
from reactor_contract.test_declarations import DECLARATIONS, document_of

from reactor.ports import capabilities, inspection
from reactor.ports.storage import Capabilities


def _protocols() -> set[str]:
    """The optional protocols an adapter declares: ``reactor.ports.capabilities``,
    ``reactor.ports.inspection`` and ``DeadLetterAdmin``."""
    return {"DeadLetterAdmin"} | {
        name
        for module in (capabilities, inspection) for name in module.__all__
        if inspect.isclass(getattr(module, name))
        and getattr(getattr(module, name), "_is_protocol", False)
    }


def test_every_capability_field_and_protocol_is_listed() -> None:
    fields = {f"Capabilities.{f.name}" for f in dataclasses.fields(Capabilities)}
    assert fields <= DECLARATIONS.keys()
    assert _protocols() <= DECLARATIONS.keys()
    assert {"InProcess", "LocksWithContexts", "QueueInspector", "Pingable"} <= _protocols()


def test_every_test_the_table_names_exists() -> None:
    """Names the table gives to tests of ``test_declarations`` are real test methods."""
    defined = {
        name
        for _, cls in inspect.getmembers(test_declarations, inspect.isclass)
        for name in vars(cls) if name.startswith("test_")
    }
    words = {word.strip("();,") for text in DECLARATIONS.values() for word in text.split()}
    named = {
        word for word in words
        if word.startswith("test_") and "." not in word and "*" not in word
        and importlib.util.find_spec(f"reactor_contract.{word}") is None  # not a module
    }
    assert named and named <= defined, named - defined


@pytest.mark.parametrize("size", [3, 4, 100, 1024 * 1024])
def test_a_probe_document_has_exactly_the_size_asked_and_nothing_to_escape(size: int) -> None:
    document = document_of(size)
    assert len(document.encode("utf-8")) == size
    assert not set(document) & {'"', "\\"} and document.isascii()


def test_a_probe_document_below_three_bytes_is_refused() -> None:
    with pytest.raises(ValueError):
        document_of(2)
