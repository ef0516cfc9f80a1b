"""Stored schedules on Redis: ``P:{schedules}:docs`` and ``P:{schedules}:versions`` (hashes,
name to document and to version token) and ``P:{schedules}:names`` (a sorted set read in lex
order for the listing), one hash tag so that ``scripts/schedule.lua`` writes the three in one
script on a cluster too.

Semantics: :class:`reactor.ports.ScheduleStore` (docs/protocol.md, "Schedules"). Records never
expire. A listing reads a page of names, then their documents and versions; a name removed in
between is left out.
"""

from __future__ import annotations

import uuid

from reactor.model.records import ScheduleRecord
from reactor_redis._base import Client, RedisScripts, storage_errors
from reactor_redis.keys import Keys

__all__ = ["RedisScheduleStore"]


class RedisScheduleStore:
    """:class:`reactor.ports.ScheduleStore` on Redis.

    Args:
        client: the shared redis-py client.
        scripts: the shared script registry.
        keys: the key builder.
    """

    def __init__(self, client: Client, scripts: RedisScripts, keys: Keys) -> None:
        self._client = client
        self._scripts = scripts
        stem = keys.schedules()
        self._keys = [f"{stem}:docs", f"{stem}:versions", f"{stem}:names"]

    def get(self, name: str) -> ScheduleRecord | None:
        """The schedule ``name``, ``None`` when none is stored.

        Raises:
            StorageError: Redis failed.
        """
        with storage_errors("schedule get"):
            pipe = self._client.pipeline(transaction=False)
            pipe.hget(self._keys[0], name)
            pipe.hget(self._keys[1], name)
            document, version = pipe.execute()
        if document is None or version is None:
            return None
        return ScheduleRecord(name=name, document=str(document), version=str(version))

    def put(self, name: str, document: str, *, expected_version: str | None) -> str | None:
        """Write ``document`` if the stored version is ``expected_version``; the new version,
        or ``None`` when it differed.

        Raises:
            StorageError: Redis failed.
        """
        if expected_version == "":  # the script's "none stored": no stored version is empty
            return None
        version = uuid.uuid4().hex
        with storage_errors("schedule put"):
            won = self._scripts(
                "schedule", self._keys, ["put", name, expected_version or "", document, version]
            )
        return version if won else None

    def delete(self, name: str, *, expected_version: str) -> bool:
        """Delete ``name`` if its stored version is ``expected_version``.

        Raises:
            StorageError: Redis failed.
        """
        if expected_version == "":  # no stored version is empty
            return False
        with storage_errors("schedule delete"):
            won = self._scripts("schedule", self._keys, ["delete", name, expected_version])
        return bool(won)

    def scan(self, *, after: str | None = None, limit: int = 100) -> list[ScheduleRecord]:
        """Stored schedules in ascending name order, strictly after ``after``.

        Raises:
            ValueError: ``limit`` is below 1.
            StorageError: Redis failed.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
        start = "-" if after is None else f"({after}"
        with storage_errors("schedule scan"):
            names = [str(n) for n in
                     self._client.zrangebylex(self._keys[2], start, "+", start=0, num=limit)]
            if not names:
                return []
            pipe = self._client.pipeline(transaction=False)
            pipe.hmget(self._keys[0], names)
            pipe.hmget(self._keys[1], names)
            documents, versions = pipe.execute()
        return [
            ScheduleRecord(name=name, document=str(document), version=str(version))
            for name, document, version in zip(names, documents, versions, strict=True)
            if document is not None and version is not None
        ]
