"""Fan-out map result slots and the lazy ``MapResultEnumerator`` (docs/fan_out.md).

Each element job of a fan-out map stores its outcome in the map's result slot ``index``
(:meth:`reactor.ports.MapStore.put_result`, codec JSON text). A slot holds one of:

* ``{"result": Success(value)}`` — the element completed;
* ``{"result": Failure(...)}`` — the element failed (it already rolled itself back);
* ``{"result": Halt(...)}`` — the element halted (the run halts);
* ``{"skipped": true}`` — the element never ran: the map had already stopped.

The value of a fan-out map step is a :class:`MapResultEnumerator`: it stores only the map id
and the element count, and reads the slots in bounded pages (``results_page``) whenever it is
iterated, so neither the owner run nor its stored context grows with the element count.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reactor import config
from reactor.errors import DeserializationError
from reactor.model import codec
from reactor.model.results import Failure, Halt, Success
from reactor.ports.storage import MapStore

__all__ = ["DEFAULT_PAGE_SIZE", "MapResultEnumerator", "decode_slot", "encode_slot"]

#: Slots read per page by :class:`MapResultEnumerator`.
DEFAULT_PAGE_SIZE = 500

SlotResult = Success | Failure | Halt


def encode_slot(result: SlotResult | None) -> str:
    """The codec JSON text of a result slot.

    Args:
        result: the element's result, or ``None`` for an element that never ran (skipped).

    Returns:
        The slot text for :meth:`reactor.ports.MapStore.put_result`.

    Raises:
        EncodeError: the result's value cannot be encoded.
    """
    if result is None:
        return codec.dumps({"skipped": True})
    return codec.dumps({"result": result})


def decode_slot(text: str) -> SlotResult | None:
    """Read a slot written by :func:`encode_slot`.

    Returns:
        The element's ``Success``/``Failure``/``Halt``, or ``None`` for a skipped element.

    Raises:
        DeserializationError: the text is not a slot.
    """
    data = codec.loads(text)
    if isinstance(data, dict):
        if data.get("skipped") is True:
            return None
        result = data.get("result")
        if isinstance(result, Success | Failure | Halt):
            return result
    raise DeserializationError("malformed map result slot")


class MapResultEnumerator:
    """The lazy value of a fan-out map step: its element results, read in bounded pages.

    Iterating yields each element's ``Success`` or ``Failure`` in element order (skipped
    elements are left out); nothing is read until then, and at most ``page_size`` slots are in
    memory at a time. The enumerator is stored in the run's context as ``{map_id, count}`` only.

    Args:
        map_id: the fan-out map.
        count: its number of elements.
        page_size: slots read per page (>= 1).
        store: the map store to read; default: the configured storage's (``reactor.configure``)
            at iteration time.

    Raises:
        ValueError: ``page_size`` < 1 or ``count`` < 0.
    """

    __slots__ = ("_store", "count", "map_id", "page_size")

    def __init__(
        self,
        map_id: str,
        count: int,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        store: MapStore | None = None,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size!r}")
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count!r}")
        self.map_id = map_id
        self.count = count
        self.page_size = page_size
        self._store = store

    def _maps(self) -> MapStore:
        if self._store is not None:
            return self._store
        return config.current().storage.maps

    def slots(self) -> Iterator[tuple[int, SlotResult | None]]:
        """Yield ``(index, result)`` for every stored slot in index order (``None`` = skipped).

        Raises:
            StorageError: the backend failed.
            DeserializationError: a slot is malformed.
        """
        maps = self._maps()
        for offset in range(0, self.count, self.page_size):
            for index, text in maps.results_page(self.map_id, offset=offset, limit=self.page_size):
                yield index, decode_slot(text)

    def __iter__(self) -> Iterator[Success | Failure]:
        for _index, result in self.slots():
            if isinstance(result, Success | Failure):
                yield result

    def __len__(self) -> int:
        """The map's element count (skipped elements included)."""
        return self.count

    def successes(self) -> Iterator[Success]:
        """The completed elements' results, in element order (read lazily)."""
        return (r for r in self if isinstance(r, Success))

    def failures(self) -> Iterator[Failure]:
        """The failed elements' results, in element order (read lazily)."""
        return (r for r in self if isinstance(r, Failure))

    def values(self) -> Iterator[Any]:
        """The completed elements' values, in element order (read lazily)."""
        return (r.value for r in self.successes())

    def failed_indexes(self) -> Iterator[int]:
        """The 0-based indexes of the failed elements (read lazily)."""
        return (i for i, r in self.slots() if isinstance(r, Failure))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MapResultEnumerator):
            return (self.map_id, self.count) == (other.map_id, other.count)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.map_id, self.count))

    def __repr__(self) -> str:
        return f"MapResultEnumerator(map_id={self.map_id!r}, count={self.count})"


def _decode_enumerator(data: Any) -> MapResultEnumerator:
    map_id, count = data["map_id"], data["count"]
    if not isinstance(map_id, str) or not isinstance(count, int):
        raise ValueError("MapResultEnumerator needs a map_id string and an int count")
    return MapResultEnumerator(map_id, count)


if not codec.is_registered(MapResultEnumerator):
    codec.register(
        MapResultEnumerator,
        lambda e: {"map_id": e.map_id, "count": e.count},
        _decode_enumerator,
        tag="reactor.MapResultEnumerator",
    )
