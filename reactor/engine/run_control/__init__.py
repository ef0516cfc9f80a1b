"""Run control: what an operator or a caller does to a run besides starting it
(docs/run-control.md).

* :mod:`~reactor.engine.run_control.idempotency`: idempotency keys, one run per key;
* :mod:`~reactor.engine.run_control.retry_run`: ``Reactor.retry`` of a failed run;
* :mod:`~reactor.engine.run_control.interrupts`, :mod:`~reactor.engine.run_control.resume` and
  :mod:`~reactor.engine.run_control.unpause`: pausing a run at an interrupt step, deciding a
  resume or an expiry, and applying the decision;
* :mod:`~reactor.engine.run_control.cancel` (the request, noticing it, carrying it out) and
  :mod:`~reactor.engine.run_control.cancel_run` (``Reactor.cancel``).
"""
