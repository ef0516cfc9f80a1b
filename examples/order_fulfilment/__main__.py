"""``python -m examples.order_fulfilment``: run the demo (see :mod:`.run`)."""

from __future__ import annotations

from .run import main

if __name__ == "__main__":
    raise SystemExit(main())
