"""The keyring and sealed values (reactor/model/secrets.py; docs/security.md, "Keys" and
"Rotation")."""

from __future__ import annotations

import base64
from datetime import date
from decimal import Decimal

import pytest

from reactor.config import Settings
from reactor.errors import ConfigurationError, DeserializationError, ReactorError, SecretKeyError
from reactor.model import codec
from reactor.model.context import Context
from reactor.model.run_records import RollbackState, UndoEntry
from reactor.model.secrets import (
    SECRET_TAG,
    Keyring,
    Sealed,
    generate_key,
    open_values,
    parse_key_specs,
)

SECRET = "tok_visa_SECRET_4242"


def test_a_sealed_value_round_trips_and_hides_its_plaintext() -> None:
    ring = Keyring([generate_key()])
    value = {"token": SECRET, "amount": Decimal("12.50"), "on": date(2024, 5, 1)}
    sealed = ring.seal(value)
    assert isinstance(sealed, Sealed) and sealed.kid == ring.kids[0]
    assert SECRET not in sealed.ct and SECRET not in repr(sealed)
    assert ring.open(sealed) == value
    assert ring.seal(SECRET).ct != ring.seal(SECRET).ct  # a fresh nonce every time
    assert ring.seal(sealed) is sealed  # never sealed twice


def test_the_codec_stores_a_sealed_value_as_a_tagged_object() -> None:
    ring = Keyring([generate_key("k1")])
    text = codec.dumps({"card": ring.seal(SECRET)})
    assert f'"__t":"{SECRET_TAG}"' in text and '"kid":"k1"' in text and SECRET not in text
    assert ring.open(codec.loads(text)["card"]) == SECRET


def test_keys_rotate_encrypt_with_the_first_decrypt_with_any() -> None:
    old, new = generate_key("2023"), generate_key("2024")
    sealed_with_old = Keyring([old]).seal(SECRET)
    rotated = Keyring([new, old])
    assert rotated.open(sealed_with_old) == SECRET
    assert rotated.seal(SECRET).kid == "2024"
    assert Keyring([new]).kids == ("2024",)


def test_a_bare_key_gets_a_stable_derived_id() -> None:
    key = generate_key()
    assert Keyring([key]).kids == Keyring([key]).kids
    assert Keyring([key]).kids[0].startswith("k") and len(Keyring([key]).kids[0]) == 9


def test_a_wrong_or_missing_key_is_a_typed_error() -> None:
    sealed = Keyring([generate_key("a")]).seal(SECRET)
    with pytest.raises(SecretKeyError) as missing:
        Keyring([generate_key("b")]).open(sealed)
    assert missing.value.kid == "a" and "REACTOR_SECRET_KEYS" in str(missing.value)
    with pytest.raises(SecretKeyError) as wrong:
        Keyring([generate_key("a")]).open(sealed)  # same id, other key
    assert "does not open" in str(wrong.value)
    tampered = Sealed(sealed.kid, sealed.ct[:-4] + ("AAAA" if sealed.ct[-4:] != "AAAA" else "BBBB"))
    with pytest.raises(SecretKeyError):
        Keyring([generate_key("a")]).open(tampered)
    assert issubclass(SecretKeyError, DeserializationError)
    assert issubclass(SecretKeyError, ReactorError)


@pytest.mark.parametrize(
    "spec",
    ["not-base64!!", base64.urlsafe_b64encode(b"short").decode(), "bad id:" + generate_key()],
)
def test_a_malformed_key_is_a_configuration_error_that_never_echoes_it(spec: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Keyring([spec], source="secret_keys")
    assert "secret_keys" in str(info.value) and "#1" in str(info.value)
    assert spec not in str(info.value)


def test_duplicate_key_ids_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="repeats key id"):
        Keyring([generate_key("x"), generate_key("x")])


def test_an_empty_keyring_cannot_seal() -> None:
    ring = Keyring([])
    assert not ring
    with pytest.raises(ConfigurationError, match="REACTOR_SECRET_KEYS"):
        ring.seal(SECRET)


def test_key_lists_parse_like_the_environment_variable() -> None:
    assert parse_key_specs(None) == ()
    assert parse_key_specs(" a , ,b ") == ("a", "b")


def test_settings_accept_a_comma_list_and_never_show_the_keys() -> None:
    one, two = generate_key(), generate_key("old")
    settings = Settings(secret_keys=f"{one},{two}")
    assert [k.get_secret_value() for k in settings.secret_keys] == [one, two]
    assert one not in repr(settings) and one not in str(settings.model_dump())
    assert Settings().secret_keys == () and Settings().allow_plaintext_secrets is False


def test_open_values_opens_nested_sealed_values_and_keeps_the_rest() -> None:
    ring = Keyring([generate_key()])
    plain = {"a": [1, 2], "b": "x"}
    assert open_values(plain, ring) is plain
    nested = {"a": [ring.seal(SECRET), (ring.seal(1),)], "b": "x"}
    assert open_values(nested, ring) == {"a": [SECRET, (1,)], "b": "x"}


def test_a_context_document_seals_its_secret_inputs_and_arguments() -> None:
    ring = Keyring([generate_key()])
    ctx = Context(
        context_id="run-1", reactor="r", inputs={"card": SECRET, "amount": 3},
        redacted=["card"],
        undo_stack=[UndoEntry("s", "step", {"card": SECRET, "n": 1}, None,
                              redacted=("card",))],
        rollback=RollbackState("t", "step", {"token": SECRET}, compensate_pending=True,
                               redacted=("token",)),
        composed_contexts={"child": Context(context_id="c", reactor="r2",
                                            inputs={"token": SECRET}, redacted=["token"])},
    )
    text = codec.encode_document(ctx.to_document(seal=ring.seal))
    assert SECRET not in text and text.count(SECRET_TAG) == 4
    assert ctx.inputs["card"] == SECRET  # the context itself is unchanged
    plain = codec.encode_document(ctx.to_document())
    assert SECRET in plain  # no sealer: in clear (the in-process backends)
    back = Context.from_document(codec.decode_document(text))
    assert isinstance(back.inputs["card"], Sealed) and back.inputs["amount"] == 3
    assert open_values(back.undo_stack[0].arguments, ring) == {"card": SECRET, "n": 1}
