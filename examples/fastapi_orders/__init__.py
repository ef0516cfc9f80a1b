"""FastAPI orders: a web endpoint that starts a saga of ``async def`` steps with ``await arun``.

:func:`~examples.fastapi_orders.app.create_app` builds a FastAPI app whose ``POST /orders``
runs the :class:`~examples.fastapi_orders.app.Order` saga (reserve stock, authorise payment and
screen for fraud at the same time, then confirm) with ``await Order.arun(...)``, off the
server's event loop, while the steps' I/O waits run on it (docs/concepts.md, "Async steps";
"Concurrency"). ``POST /orders-threaded`` starts the same saga with the blocking
``Order.run(...)`` in a worker thread, for comparison (``benchmarks/fastapi_orders.py``
load-tests both), and ``GET /orders/{run_id}`` reads a stored run.

Serve it with ``uvicorn --factory examples.fastapi_orders.app:create_app`` from the repository
root; see this package's README.md.
"""
