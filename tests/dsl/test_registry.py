"""Registration of reactors by name (docs/architecture.md, "Layers")."""

from __future__ import annotations

import pytest

from reactor import Reactor, registry
from reactor.dsl import step
from reactor.errors import DefinitionError, UnknownReactorError


def test_reactors_register_under_module_qualname_or_explicit_name() -> None:
    class Implicit(Reactor):
        s = step(lambda inputs, ctx: 1)

    class Explicit(Reactor, name="tests.dsl.explicit"):
        s = step(lambda inputs, ctx: 1)

    assert Implicit.reactor_name == f"{__name__}.{Implicit.__qualname__}"
    assert registry.get(Implicit.reactor_name) is Implicit
    assert registry.get("tests.dsl.explicit") is Explicit
    assert "tests.dsl.explicit" in registry.names()


def test_same_origin_re_registers_and_another_origin_is_rejected() -> None:
    def make() -> type[Reactor]:
        class Again(Reactor, name="tests.dsl.again"):
            s = step(lambda inputs, ctx: 1)

        return Again

    first, second = make(), make()
    assert registry.get("tests.dsl.again") is second and first is not second
    with pytest.raises(DefinitionError, match="already registered"):

        class Other(Reactor, name="tests.dsl.again"):
            s = step(lambda inputs, ctx: 1)


def test_unknown_name() -> None:
    with pytest.raises(UnknownReactorError):
        registry.get("no.such.reactor")
    assert registry.unregister("no.such.reactor") is False
