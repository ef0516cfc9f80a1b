"""``reactor.testing``'s public surface: every name importable and documented, and the guide
(docs/testing.md) never sends users into reactor's private modules."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import reactor.testing as kit

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def test_every_public_name_resolves_and_has_a_docstring() -> None:
    assert sorted(kit.__all__) == sorted(set(kit.__all__))
    for name in kit.__all__:
        value = getattr(kit, name)
        assert name in dir(kit)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), f"{name} has no docstring"


def test_every_public_method_has_a_docstring() -> None:
    for cls in (kit.TestEnvironment, kit.TestClock, kit.StepFault, kit.StorageFault,
                kit.PendingJob):
        for name, member in vars(cls).items():
            if name.startswith("_") or not callable(member):
                continue
            assert (member.__doc__ or "").strip(), f"{cls.__name__}.{name} has no docstring"


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        kit.no_such_name  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_the_guide_names_only_public_modules() -> None:
    text = DOC.read_text(encoding="utf-8")
    modules = set(re.findall(r"\breactor(?:\.[a-z_]+)+", text))
    # reactor.configure (reactor.__all__) and reactor.ports (its pinned protocols, Clock among
    # them: tests/test_public_api.py) are public; "The clock" names them.
    assert modules <= {"reactor.testing", "reactor.Settings", "reactor.StorageError",
                       "reactor.ReactorError", "reactor.configure", "reactor.ports"}, modules
