"""``FanOut``: the option that makes a ``map_step`` a fan-out map (docs/fan_out.md).

``map_step(Element, source=..., fan_out=FanOut(batch_size=50))`` runs one background job per
element instead of running the elements one after another in the caller. ``fan_out=True`` is
shorthand for ``FanOut()`` (batch size 50, ruby_reactor's ``Map::DEFAULT_BATCH_SIZE``).

The map is a hand-off point: the run that reaches it persists itself, records the map, and
dispatches at most ``batch_size`` element jobs per "throw"; the element that ends a batch claims
the next one. The run is resumed by the map's collector once every element has settled. See
:mod:`reactor.engine.maps.fan_out` and ``docs/fan_out.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from reactor.errors import DefinitionError

__all__ = ["DEFAULT_BATCH_SIZE", "ROLLBACK_CHUNK", "FanOut"]

#: Element jobs one throw enqueues when ``FanOut`` names no ``batch_size``.
DEFAULT_BATCH_SIZE = 50
#: Element contexts an in-process map rollback reads per chunk.
ROLLBACK_CHUNK = 100


@dataclass(frozen=True, slots=True)
class FanOut:
    """Run a map's elements as background jobs, ``batch_size`` per throw.

    Attributes:
        batch_size: element jobs enqueued per throw (>= 1; default 50). The same size is used
            for the batches of the map's distributed rollback.

    Raises:
        DefinitionError: ``batch_size`` is not a positive integer.
    """

    batch_size: int = DEFAULT_BATCH_SIZE

    def __post_init__(self) -> None:
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or (
            self.batch_size < 1
        ):
            raise DefinitionError(
                f"FanOut(batch_size=...) must be a positive integer, got {self.batch_size!r}"
            )

    @classmethod
    def coerce(cls, value: FanOut | bool | None) -> FanOut | None:
        """Normalise a ``map_step(fan_out=...)`` argument.

        Args:
            value: a :class:`FanOut`, ``True`` (= ``FanOut()``), or ``False``/``None`` (inline).

        Returns:
            The option, or ``None`` for an inline map.

        Raises:
            DefinitionError: any other value.
        """
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, FanOut):
            return value
        raise DefinitionError(
            f"map_step(fan_out=...) takes FanOut(batch_size=N) or True, got {value!r}"
        )
