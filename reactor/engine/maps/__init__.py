"""Map steps: one element-reactor run per item of a collection (docs/concepts.md, "Inline
map"; docs/fan_out.md).

* :mod:`~reactor.engine.maps.inline`: an inline map runs its elements one after another in the
  run's own execution;
* :mod:`~reactor.engine.maps.fan_out`: a fan-out map dispatches one job per element in batches
  and adopts the settled outcome;
* :mod:`~reactor.engine.maps.dispatcher`: claiming a fan-out map's next batch of indexes,
  storing its elements' pending contexts and enqueueing their jobs;
* :mod:`~reactor.engine.maps.results`: a fan-out map's result slots and the lazy
  ``MapResultEnumerator`` its step returns;
* :mod:`~reactor.engine.maps.rollback`: rolling a fan-out map back, element by element, and
  :mod:`~reactor.engine.maps.outcomes`: what each of its positions settles as;
* :mod:`~reactor.engine.maps.elements`: reading a map step's elements for the run views and
  the dashboard.
"""
