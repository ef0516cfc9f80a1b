"""Render the trace picture of docs/observability.md (``docs/img/trace.svg``).

Runs the example of docs/observability.md, "A whole trace" — a ``Background(all=True)`` order
with an ``async_step`` and a fan-out map of 5 elements, on two worker threads — with
:class:`reactor.observability.OpenTelemetryMiddleware` exporting to the SDK's in-memory
exporter, then draws the finished spans as a waterfall: one row per span, indented under its
parent, its bar placed on the trace's time axis.

Usage::

    .venv/bin/python scripts/render_trace.py [OUTPUT.svg]
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import reactor
from reactor import (
    Background,
    FanOut,
    Input,
    Reactor,
    Step,
    async_step,
    element,
    input,
    map_step,
    result,
    step,
)
from reactor.jobs.worker import Worker
from reactor.observability import OpenTelemetryMiddleware

ROW = 22
LABEL_WIDTH = 250
BAR_WIDTH = 560
RIGHT_MARGIN = 190
COLORS = {"run": "#4c78a8", "step": "#59a14f", "job": "#f28e2b", "undo": "#b07aa1",
          "compensate": "#b07aa1", "rollback": "#e15759"}


class Charge(Step):
    amount = Input(int)
    card = Input(str, redact=True)

    def run(self) -> dict[str, int]:
        return {"charged": self.inputs.amount}


class Pack(Reactor, name="docs.pack"):
    sku = Input(str)

    @step(sku=input("sku"))
    def pick(inputs: Any, ctx: Any) -> str:
        return f"picked {inputs.sku}"


class Order(Reactor, name="docs.order"):
    skus = Input(list)
    amount = Input(int)
    card = Input(str, redact=True)
    background = Background(all=True)

    charge = async_step(Charge, amount=input("amount"), card=input("card"))
    lines = map_step(Pack, source=input("skus"), args={"sku": element("lines")},
                     fan_out=FanOut(batch_size=5))

    @step(charged=result("charge"), lines=result("lines"))
    def ship(inputs: Any, ctx: Any) -> str:
        return "shipped"


def record() -> list[ReadableSpan]:
    """Run the example once and return its spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runtime = reactor.configure(
        storage="memory://", router="local://?workers=0",
        middleware=[OpenTelemetryMiddleware(tracer_provider=provider, metrics=False)],
    )
    worker = Worker(runtime, threads=2, poll_seconds=0.01, liveness_wait=0.0)
    worker.start()
    try:
        handle = Order.run(skus=["a", "b", "c", "d", "e"], amount=5, card="tok_visa")
        handle.wait(30)  # type: ignore[union-attr]
    finally:
        worker.stop(timeout=10)
        reactor.config.reset()
    return list(exporter.get_finished_spans())


def _ordered(spans: list[ReadableSpan]) -> list[tuple[int, ReadableSpan]]:
    """Depth-first, children by start time: ``(depth, span)``."""
    ids = {s.context.span_id for s in spans}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    out: list[tuple[int, ReadableSpan]] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s.start_time or 0):
            out.append((depth, span))
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return out


def render(spans: list[ReadableSpan]) -> str:
    """The waterfall as SVG text."""
    rows = _ordered(spans)
    start = min(s.start_time or 0 for s in spans)
    end = max(s.end_time or 0 for s in spans)
    total = max(end - start, 1)
    height = ROW * (len(rows) + 3)
    width = LABEL_WIDTH + BAR_WIDTH + RIGHT_MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="monospace" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="8" y="15" font-weight="bold">one trace: {len(spans)} spans, '
        f'{total / 1e6:.1f} ms (docs/observability.md)</text>',
    ]
    for row, (depth, span) in enumerate(rows, start=1):
        y = ROW * row + 6
        kind = span.name.split(" ", 1)[0]
        x = LABEL_WIDTH + BAR_WIDTH * ((span.start_time or start) - start) / total
        w = max(BAR_WIDTH * ((span.end_time or end) - (span.start_time or start)) / total, 1.5)
        status = (span.attributes or {}).get("reactor.run.status") or (
            span.attributes or {}).get("reactor.step.status") or ""
        label = escape(f"{'  ' * depth}{span.name}")
        parts.append(f'<text x="8" y="{y + 13}" xml:space="preserve">{label}</text>')
        parts.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{ROW - 6}" '
                     f'rx="2" fill="{COLORS.get(kind, "#999")}"/>')
        duration = ((span.end_time or end) - (span.start_time or start)) / 1e6
        parts.append(f'<text x="{x + w + 4:.1f}" y="{y + 13}" fill="#444">{duration:.1f} ms'
                     f'{" " + escape(str(status)) if status else ""}</text>')
    legend_y = ROW * (len(rows) + 2) + 4
    for i, (kind, color) in enumerate(
        (k, c) for k, c in COLORS.items() if k not in ("compensate",)
    ):
        x = 8 + i * 150
        parts.append(f'<rect x="{x}" y="{legend_y}" width="12" height="12" fill="{color}"/>')
        label = "undo/compensate" if kind == "undo" else kind
        parts.append(f'<text x="{x + 16}" y="{legend_y + 11}">{label}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> None:
    """Record the example's trace and write the picture."""
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img/trace.svg")
    target.write_text(render(record()), encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
