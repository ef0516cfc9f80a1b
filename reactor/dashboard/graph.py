"""The step graph of a run: its reactor's steps, their dependencies and nested structure, each
coloured by what the stored run says happened to it (docs/dashboard.md, "Run page").

A node's ``state`` is read from the run's (masked) document only: its trace, results, failure,
current step, pending interrupt and ``waiting`` marker, plus the Step Result Records of its
``async_step`` units. A ``compose`` step nests the child reactor's graph coloured by the child's
embedded run; a ``map`` step nests the element reactor's structure, every node of it in the state
``element`` (not ``pending``: each element is a run of its own with its own states, counted in
the map summary and shown on the element's own run page). :func:`layout` places the nodes in
dependency columns for the inline SVG of the run page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactor.dashboard.stored import engine_state_of
from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import ReactorDefinition
from reactor.model.engine_state import EngineState
from reactor.model.run_documents import embedded_children, trace_of

__all__ = [
    "ELEMENT_STATE",
    "NODE_HEIGHT",
    "NODE_WIDTH",
    "STATES",
    "layout",
    "step_graph",
    "step_state",
]

#: Every node state, in the order the legend shows them.
STATES: tuple[str, ...] = (
    "pending", "running", "waiting", "dispatched", "paused", "completed", "skipped", "halted",
    "failed", "compensated", "undone", "rollback_failed",
)
#: The state of every node of a map step's element structure: it is no one run's state.
ELEMENT_STATE = "element"
#: Size of a node in the run page's SVG, in pixels.
NODE_WIDTH = 170
NODE_HEIGHT = 46
_GAP_X = 60
_GAP_Y = 18
_ROLLBACK = frozenset({"undo", "undo_failure", "compensate", "compensate_failure"})
#: Nesting levels of compose children drawn.
MAX_NESTING = 4


def _entries(document: Mapping[str, Any], step: str) -> list[str]:
    return [e.type for e in trace_of(document) if e.step == step]


def step_state(
    name: str,
    spec: StepSpec,
    document: Mapping[str, Any],
    engine_state: EngineState,
    async_record: Mapping[str, Any] | None = None,
) -> str:
    """What happened to step ``name`` in a run (one of :data:`STATES`).

    Args:
        name: the step name.
        spec: its declaration.
        document: the run's masked document.
        engine_state: the run's engine state.
        async_record: for an ``async_step``, its Step Result Record as shown
            (``{"status", "outcome", ...}``), if one is stored.
    """
    types = _entries(document, name)
    status = str(document.get("status", ""))
    failure = document.get("failure")
    failed_step = None
    if isinstance(failure, Mapping):
        payload = failure.get("v") if "__t" in failure else failure
        if isinstance(payload, Mapping):
            failed_step = payload.get("step_name")
    forward = [t for t in types if t not in _ROLLBACK]
    if "undo_failure" in types or "compensate_failure" in types:
        return "rollback_failed"
    if failed_step == name or (forward and forward[-1] == "failed"):
        return "failed"
    if "undo" in types:
        return "undone"
    if "compensate" in types:
        return "compensated"
    interrupt = engine_state.interrupt
    if status == "paused" and interrupt is not None and interrupt.step.split(".")[0] == name:
        return "paused"
    if types and types[-1] == "halt":
        return "halted"
    if types and types[-1] == "skipped":
        return "skipped"
    results = document.get("intermediate_results")
    if isinstance(results, Mapping) and name in results:
        return "completed"
    if spec.kind == "async_step" and async_record is not None:
        if async_record.get("status") == "completed":
            outcome = async_record.get("outcome")
            ok = not (isinstance(outcome, Mapping) and outcome.get("status") == "failure")
            return "completed" if ok else "failed"
        return "waiting" if async_record.get("waiting") else "dispatched"
    waiting = engine_state.waiting
    if waiting is not None and waiting.scope == name and status == "running":
        return "waiting"
    if document.get("current_step") == name or "run" in types:
        return "running" if status in ("running", "pending", "rolling_back") else "failed"
    return "pending"


def _child_document(document: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return embedded_children(document).get(name)


def step_graph(
    definition: ReactorDefinition,
    document: Mapping[str, Any] | None,
    engine_state: EngineState,
    async_records: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    depth: int = 0,
    template_state: str = "pending",
) -> dict[str, Any]:
    """The graph of ``definition``'s steps, coloured by ``document`` (``None``: a template:
    every node in ``template_state``).

    Args:
        definition: the reactor's definition.
        document: the run's masked document, or ``None``.
        engine_state: the run's engine state.
        async_records: the Step Result Records of its async steps, by step name.
        depth: the nesting level (compose and map children are drawn down to
            :data:`MAX_NESTING`).
        template_state: the state of every node when ``document`` is ``None``: ``pending``
            for a step not reached, :data:`ELEMENT_STATE` for a map's element structure.

    Returns:
        ``{"reactor", "nodes": [...], "background"}``; each node is ``{"name", "kind",
        "state", "depends_on", "retries", "coordination", "background", "fan_out", "atomic",
        "target", "children"}`` (``children``: the nested graph of a compose or map step).
    """
    background = definition.background
    nodes: list[dict[str, Any]] = []
    for name, spec in definition.steps.items():
        record = (async_records or {}).get(name)
        state = (
            step_state(name, spec, document, engine_state, record)
            if document is not None else template_state
        )
        children: dict[str, Any] | None = None
        child_definition = definition.children.get(name)
        if child_definition is not None and depth < MAX_NESTING:
            child_document = _child_document(document, name) if document is not None else None
            is_map = spec.kind == "map"
            children = step_graph(
                child_definition, None if is_map else child_document,
                engine_state_of(dict(child_document) if child_document is not None else None),
                depth=depth + 1,
                template_state=ELEMENT_STATE if is_map
                else template_state if document is None else "pending",
            )
        nodes.append({
            "name": name,
            "kind": spec.kind,
            "state": state,
            "depends_on": list(definition.dependencies.get(name, ())),
            "retries": spec.retries.max_attempts if spec.retries is not None else None,
            "coordination": [d.primitive for d in spec.coordination],
            "background": background.mode
            if background is not None and background.step == name else None,
            "fan_out": spec.fan_out is not None,
            "atomic": spec.atomic if spec.kind == "map" else None,
            "target": getattr(getattr(spec.target, "definition", None), "name", None),
            "children": children,
        })
    return {
        "reactor": definition.name,
        "nodes": nodes,
        "background": None if background is None
        else {"mode": background.mode, "step": background.step},
        "coordination": [d.primitive for d in definition.coordination],
    }


def layout(graph: Mapping[str, Any]) -> dict[str, Any]:
    """Positions for drawing ``graph`` (from :func:`step_graph`) as an SVG: one column per
    dependency depth, nodes in declaration order within a column.

    Returns:
        ``{"width", "height", "nodes": [{"name", "state", "kind", "x", "y", ...}], "edges":
        [{"from", "to", "path"}]}`` in pixels.
    """
    nodes = list(graph.get("nodes") or [])
    level: dict[str, int] = {}
    for node in nodes:  # declaration order is a topological order of the graph
        deps = [level[d] for d in node.get("depends_on", []) if d in level]
        level[node["name"]] = 1 + max(deps) if deps else 0
    rows: dict[int, int] = {}
    placed: dict[str, dict[str, Any]] = {}
    for node in nodes:
        column = level[node["name"]]
        row = rows.get(column, 0)
        rows[column] = row + 1
        placed[node["name"]] = {
            **{k: v for k, v in node.items() if k != "children"},
            "x": 10 + column * (NODE_WIDTH + _GAP_X),
            "y": 10 + row * (NODE_HEIGHT + _GAP_Y),
        }
    edges = []
    for node in nodes:
        target = placed[node["name"]]
        for dep in node.get("depends_on", []):
            source = placed.get(dep)
            if source is None:
                continue
            x1, y1 = source["x"] + NODE_WIDTH, source["y"] + NODE_HEIGHT // 2
            x2, y2 = target["x"], target["y"] + NODE_HEIGHT // 2
            middle = (x1 + x2) // 2
            edges.append({
                "from": dep, "to": node["name"],
                "path": f"M{x1},{y1} C{middle},{y1} {middle},{y2} {x2 - 6},{y2}",
            })
    columns = max(level.values(), default=0) + 1
    height = max(rows.values(), default=1)
    return {
        "width": 20 + columns * NODE_WIDTH + (columns - 1) * _GAP_X,
        "height": 20 + height * NODE_HEIGHT + (height - 1) * _GAP_Y,
        "nodes": list(placed.values()),
        "edges": edges,
    }
