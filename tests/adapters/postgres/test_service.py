"""The private PostgreSQL cluster scripts/test starts answers, on its own port (never the
system instance on 5432), with UTF-8 and the ``C`` collation the adapter's key order needs."""

from __future__ import annotations

from urllib.parse import urlsplit

import psycopg
import pytest

pytestmark = pytest.mark.postgres


def test_the_private_cluster_answers(pg_url: str) -> None:
    assert urlsplit(pg_url).port != 5432
    with psycopg.connect(pg_url, connect_timeout=5) as conn:
        row = conn.execute("SELECT current_setting('server_encoding'), 'b' > 'B' COLLATE \"C\"")
        assert row.fetchone() == ("UTF8", True)
