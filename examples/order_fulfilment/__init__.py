"""Order fulfilment: the project's end-to-end saga demo on a realistic dataset.

A :class:`~examples.order_fulfilment.saga.Fulfil` run validates an order, reserves stock per
line item (a map), charges the card (a composed ``Payment`` reactor: authorize, capture), books
a shipment (retried on carrier outages) and queues a confirmation e-mail — against in-process
fake services (:mod:`examples.order_fulfilment.services`) whose final state
:func:`~examples.order_fulfilment.run.check_invariants` verifies. An order above the review
threshold runs :class:`~examples.order_fulfilment.saga.FulfilWithReview`, which pauses after
the payment at a ``manual_review`` interrupt until a reviewer resumes it: an approval ships the
order, a rejection rolls it back.

Run it with ``python -m examples.order_fulfilment`` (see :mod:`examples.order_fulfilment.run`);
regenerate the dataset with ``python -m examples.order_fulfilment.generate_orders``.
"""
