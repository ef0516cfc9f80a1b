"""Registering your own types for stored runs (docs/concepts.md, "Stored runs").

Everything a run stores — inputs, step results, failures — is encoded as JSON by reactor's
codec. JSON-native values, dates, decimals, UUIDs, bytes, sets and tuples work as they are; a
pydantic model, an enum, a dataclass or any other class must be registered once, at import,
under a stable tag (the tag is what is stored, so renaming the class keeps old runs
readable)::

    from reactor import codec

    codec.register_model(Order, tag="shop.Order")
    codec.register(Money, lambda m: [str(m.amount), m.currency],
                   lambda v: Money(Decimal(v[0]), v[1]), tag="shop.Money")

Encoding an unregistered value raises :class:`reactor.errors.EncodeError` naming its type and
where it sits in the stored document.
"""

from __future__ import annotations

from reactor.errors import EncodeError
from reactor.model.codec import (
    is_registered,
    register,
    register_dataclass,
    register_enum,
    register_model,
    registered_tag,
)

__all__ = [
    "EncodeError",
    "is_registered",
    "register",
    "register_dataclass",
    "register_enum",
    "register_model",
    "registered_tag",
]
