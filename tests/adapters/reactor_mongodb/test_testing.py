"""reactor_mongodb.testing: the serialised mongomock client the ``mongomock://`` URLs use."""

from __future__ import annotations

import inspect
import uuid
from typing import Any

import mongomock
from reactor_mongodb.testing import client_for


def test_a_proxied_method_introspects_as_mongomocks_own() -> None:
    """A method read through the serialising proxy keeps the name, docstring and signature of
    the mongomock method it calls (``help()``, tracebacks and ``inspect.signature`` show
    ``find_one(filter=None, ...)``, not an anonymous wrapper), and still calls it."""
    name = f"t{uuid.uuid4().hex[:12]}"
    collection = client_for(name)[name]["c"]
    target: Any = mongomock.MongoClient()[name]["c"]  # a plain mongomock collection, unproxied
    find_one = collection.find_one
    assert (find_one.__name__, find_one.__doc__) == ("find_one", target.find_one.__doc__)
    assert inspect.signature(find_one) == inspect.signature(target.find_one)
    collection.insert_one({"_id": 1, "n": 2})
    assert find_one({"_id": 1}) == {"_id": 1, "n": 2}
