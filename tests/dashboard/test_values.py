"""What stored values look like on the dashboard (docs/dashboard.md, "What is shown"):
codec tags unwrapped, failures without tracebacks, secrets masked, everything bounded."""

from __future__ import annotations

import json
from decimal import Decimal

from reactor.dashboard.values import MAX_ITEMS, MAX_TEXT, display, failure_view
from reactor.model import codec
from reactor.model.masking import mask_document
from reactor.model.results import Failure, RollbackFailure, Success


def _stored(value: object) -> object:
    return json.loads(codec.dumps(value))


def test_codec_tags_are_unwrapped() -> None:
    value = {"amount": Decimal("12.50"), "pair": (1, 2), "tags": {"a"}, "ok": Success(3)}
    assert display(_stored(value)) == {
        "amount": "12.50", "pair": [1, 2], "tags": ["a"], "ok": {"status": "success",
                                                                   "value": 3},
    }
    assert display(_stored({1: "one"})) == {"1": "one"}
    assert display(float("nan")) == "nan"


def test_a_failure_is_shown_without_its_traceback() -> None:
    failure = Failure(ValueError("boom"), step_name="charge", traceback="Traceback ...",
                      rollback_failures=[RollbackFailure("reserve", "undo", "raised", "x")])
    shown = failure_view(_stored(failure))
    assert shown is not None
    assert shown["error"] == "boom" and shown["step"] == "charge"
    assert shown["rollback_failures"][0]["step"] == "reserve"
    assert "Traceback" not in json.dumps(shown)
    assert failure_view(_stored(Success(1))) is None


def test_secrets_and_sizes_are_bounded() -> None:
    document = {"inputs": {"card": "4111", "n": 1}, "redacted": ["card"]}
    assert display(mask_document(document))["inputs"] == {"card": "[REDACTED]", "n": 1}
    assert display({"__t": "reactor.Secret", "v": {"kid": "k", "ct": "x"}}) == "[REDACTED]"
    long = display("x" * (MAX_TEXT + 10))
    assert long.startswith("x" * MAX_TEXT) and long.endswith("[10 more characters]")
    many = display(list(range(MAX_ITEMS + 5)))
    assert len(many) == MAX_ITEMS + 1 and many[-1] == "[5 more items]"
    deep: object = "bottom"
    for _ in range(40):
        deep = [deep]
    assert "nested too deep" in json.dumps(display(deep))
