"""The runs list's parameters (docs/dashboard.md, "Runs list")."""

from __future__ import annotations

import pytest

from reactor.dashboard.errors import BadRequest
from reactor.dashboard.graph import layout
from reactor.dashboard.listing import RunQuery, parse_time


def test_times_are_epochs_iso_dates_or_ages() -> None:
    assert parse_time("1700000000.5", "from") == 1700000000.5
    assert parse_time("2024-05-01", "from") == 1714521600.0
    assert parse_time("2024-05-01T02:00:00+02:00", "from") == 1714521600.0
    assert parse_time("2h", "from", now=10_000.0) == 10_000.0 - 7200
    for bad in ("soon", "inf", "2x"):
        with pytest.raises(BadRequest):
            parse_time(bad, "from")


def test_a_query_checks_its_statuses_and_limit() -> None:
    query = RunQuery.parse(status=["failed,paused", "failed", ""], reactor=" shop ",
                           created_from="1", limit=10)
    assert query.statuses == ("failed", "paused") and query.reactor == "shop"
    assert query.filters() == {"status": "failed,paused", "reactor": "shop", "from": "1.0"}
    assert RunQuery.parse(status=[""]).statuses is None
    with pytest.raises(BadRequest, match="unknown status"):
        RunQuery.parse(status=["sleeping"])
    with pytest.raises(BadRequest):
        RunQuery.parse(limit=501)


def test_the_graph_layout_puts_each_step_after_its_dependencies() -> None:
    graph = {"nodes": [
        {"name": "a", "depends_on": [], "state": "completed"},
        {"name": "b", "depends_on": ["a"], "state": "failed"},
        {"name": "c", "depends_on": ["a"], "state": "pending"},
        {"name": "d", "depends_on": ["b", "c"], "state": "pending"},
    ]}
    placed = {n["name"]: n for n in layout(graph)["nodes"]}
    assert placed["a"]["x"] < placed["b"]["x"] == placed["c"]["x"] < placed["d"]["x"]
    assert placed["b"]["y"] != placed["c"]["y"]
    edges = {(e["from"], e["to"]) for e in layout(graph)["edges"]}
    assert edges == {("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")}
