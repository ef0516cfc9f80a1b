"""Secrets at rest: the keyring that encrypts redacted values, and the sealed value it produces
(docs/security.md).

Values that must not be stored in clear (reactor inputs declared ``redact=True``, and step
arguments fed from them) are *sealed* before a run context is written: the value is encoded
with :mod:`reactor.model.codec`, then encrypted with AES-256-GCM (``cryptography``; a random
96-bit nonce per value, authenticated, so a wrong key or a tampered value never decrypts to
garbage). The result is a :class:`Sealed` value, which the codec stores as the tagged object
``{"__t": "reactor.Secret", "v": {"kid": KEY_ID, "ct": BASE64URL(nonce + ciphertext)}}``.

Keys (docs/security.md, "Keys"): a :class:`Keyring` is built from key specs, each either a
bare base64url text of 32 random bytes, or ``KID:KEY`` to name the key yourself. A bare key's
id is derived from the key (``k`` + the first 8 hex digits of its SHA-256), so it can be
listed without ever being named. The first key encrypts; every key decrypts (the stored ``kid``
picks it), which is how keys rotate (docs/security.md, "Rotation").

This module holds no policy: :mod:`reactor.engine.secret_policy` decides which keyring a
runtime uses and whether plaintext is allowed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import BeforeValidator, SecretStr

from reactor.errors import ConfigurationError, SecretKeyError
from reactor.model import codec

__all__ = [
    "ENV_VAR",
    "SECRET_TAG",
    "Keyring",
    "Sealed",
    "SecretKeyError",
    "SecretKeys",
    "SecretOpener",
    "configured_specs",
    "generate_key",
    "open_values",
    "parse_key_specs",
    "seal_names",
]

#: The environment variable holding the comma-separated key specs (docs/security.md, "Keys").
ENV_VAR: Final = "REACTOR_SECRET_KEYS"

#: The codec tag of a sealed value in stored JSON.
SECRET_TAG: Final = "reactor.Secret"

#: Bound into every ciphertext as associated data: a value sealed by something else (or for
#: another purpose) never opens as a reactor secret.
_AAD: Final = b"reactor.secret.v1"
_NONCE_BYTES: Final = 12
_KEY_BYTES: Final = 32
_KID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


@dataclass(frozen=True)
class Sealed:
    """An encrypted value as stored: only a keyring holding key ``kid`` can open it
    (docs/security.md, "What is encrypted").

    Attributes:
        kid: the id of the key that sealed it.
        ct: base64url (unpadded) of the 12-byte nonce followed by the AES-GCM ciphertext and
            its 16-byte tag.
    """

    kid: str
    ct: str

    def __repr__(self) -> str:
        return f"Sealed(kid={self.kid!r})"


def _encode_sealed(value: Sealed) -> dict[str, str]:
    return {"kid": value.kid, "ct": value.ct}


def _decode_sealed(payload: Any) -> Sealed:
    if not isinstance(payload, Mapping):
        raise ValueError("a sealed value must be an object")
    kid, ct = payload["kid"], payload["ct"]
    if not isinstance(kid, str) or not isinstance(ct, str):
        raise TypeError("a sealed value's kid and ct must be strings")
    return Sealed(kid=kid, ct=ct)


codec.register(Sealed, _encode_sealed, _decode_sealed, tag=SECRET_TAG)


def _b64decode(text: str) -> bytes:
    padded = text + "=" * (-len(text) % 4)
    return base64.urlsafe_b64decode(padded.encode("ascii"))


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _split_specs(value: Any) -> Any:
    """Accept ``"k1,k2"`` (an environment-style list) wherever a list of key specs goes."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


#: The type of the ``secret_keys`` setting: key specs, kept as ``SecretStr`` so they never
#: appear in a ``repr`` of the settings; a comma-separated string is split.
SecretKeys = Annotated[tuple[SecretStr, ...], BeforeValidator(_split_specs)]


def parse_key_specs(text: str | None) -> tuple[str, ...]:
    """Split a comma-separated key list (the ``REACTOR_SECRET_KEYS`` format;
    docs/security.md, "Keys").

    Args:
        text: e.g. ``"NEWKEY,OLDKEY"`` or ``"2024:NEWKEY,2023:OLDKEY"``; ``None`` or blank
            gives no keys.

    Returns:
        The non-blank specs, in order (the first one encrypts).
    """
    if not text:
        return ()
    return tuple(part.strip() for part in text.split(",") if part.strip())


def configured_specs(setting: Iterable[SecretStr]) -> tuple[str, tuple[str, ...]]:
    """The key specs in force: the ``secret_keys`` setting when it holds any, else
    ``REACTOR_SECRET_KEYS`` (read now), with the name errors should use for their source
    (docs/security.md, "Keys").

    Args:
        setting: the ``secret_keys`` setting's values.

    Returns:
        ``(source, specs)``: ``source`` names the setting and the variable, never key text.
    """
    specs = tuple(s.get_secret_value() for s in setting)
    if not specs:
        specs = parse_key_specs(os.environ.get(ENV_VAR))
    return f"{ENV_VAR} / secret_keys", specs


def generate_key(kid: str | None = None) -> str:
    """Make a new random key spec (32 bytes from ``os.urandom``, base64url, unpadded).

    Args:
        kid: a key id to prefix (``KID:KEY``); ``None`` for a bare key whose id is derived.

    Returns:
        A spec for ``REACTOR_SECRET_KEYS`` / ``secret_keys`` (docs/security.md, "Keys").

    Raises:
        ConfigurationError: ``kid`` is not 1-64 characters of ``A-Z a-z 0-9 . _ -``.
    """
    key = _b64encode(os.urandom(_KEY_BYTES))
    if kid is None:
        return key
    if not _KID.match(kid):
        raise ConfigurationError(f"key id {kid!r} must be 1-64 of A-Z a-z 0-9 . _ -")
    return f"{kid}:{key}"


def _derived_kid(key: bytes) -> str:
    return "k" + hashlib.sha256(key).hexdigest()[:8]


class Keyring:
    """The keys that seal and open secrets: the first encrypts, any decrypts
    (docs/security.md, "Keys" and "Rotation").

    Args:
        specs: key specs, first = current (see the module docstring); may be empty (a keyring
            that can neither seal nor open; ``bool(keyring)`` is ``False``).
        source: where the specs came from, named in errors (never the key material).

    Raises:
        ConfigurationError: a spec is not base64url of exactly 32 bytes, names an invalid key
            id, or two specs share a key id. The message names ``source`` and the position of
            the bad spec, never its text.
    """

    def __init__(self, specs: Iterable[str], *, source: str = ENV_VAR) -> None:
        keys: dict[str, AESGCM] = {}
        order: list[str] = []
        for position, spec in enumerate(specs, start=1):
            kid, key = self._parse(spec, position, source)
            if kid in keys:
                raise ConfigurationError(f"{source}: key #{position} repeats key id {kid!r}")
            keys[kid] = AESGCM(key)
            order.append(kid)
        self._keys = keys
        self._order = tuple(order)

    @staticmethod
    def _parse(spec: str, position: int, source: str) -> tuple[str, bytes]:
        spec = spec.strip()
        kid: str | None = None
        if ":" in spec:
            kid, _, spec = spec.partition(":")
            if not _KID.match(kid):
                raise ConfigurationError(
                    f"{source}: key #{position} has an invalid key id (1-64 of "
                    "A-Z a-z 0-9 . _ -)"
                )
        try:
            key = _b64decode(spec)
        except (binascii.Error, ValueError, UnicodeEncodeError):
            key = b""
        if len(key) != _KEY_BYTES:
            raise ConfigurationError(
                f"{source}: key #{position} is not base64url of {_KEY_BYTES} bytes (make one "
                "with: python -c 'from reactor.model.secrets import generate_key; "
                "print(generate_key())')"
            )
        return (kid or _derived_kid(key)), key

    def __bool__(self) -> bool:
        return bool(self._order)

    def __repr__(self) -> str:
        return f"Keyring(kids={list(self._order)!r})"

    @property
    def kids(self) -> tuple[str, ...]:
        """The key ids, the encrypting one first (never the key material)."""
        return self._order

    def seal(self, value: Any) -> Sealed:
        """Encrypt ``value`` with the first key (an already sealed value is returned as is).

        Args:
            value: any value :mod:`reactor.model.codec` encodes.

        Returns:
            The :class:`Sealed` value.

        Raises:
            ConfigurationError: the keyring is empty.
            EncodeError: the codec cannot encode ``value``.
        """
        if isinstance(value, Sealed):
            return value
        if not self._order:
            raise ConfigurationError(f"no secret key configured (set {ENV_VAR} or secret_keys)")
        kid = self._order[0]
        nonce = os.urandom(_NONCE_BYTES)
        plaintext = codec.dumps(value).encode("utf-8")
        ciphertext = self._keys[kid].encrypt(nonce, plaintext, _AAD)
        return Sealed(kid=kid, ct=_b64encode(nonce + ciphertext))

    def open(self, sealed: Sealed) -> Any:
        """Decrypt and decode a sealed value.

        Args:
            sealed: a value made by :meth:`seal` (with any key of this keyring).

        Returns:
            The original value.

        Raises:
            SecretKeyError: no key has ``sealed.kid``, or that key does not authenticate it.
            DeserializationError: the decrypted text is not codec JSON (cannot happen for a
                value this module sealed).
        """
        aead = self._keys.get(sealed.kid)
        if aead is None:
            known = ", ".join(self._order) or "none"
            raise SecretKeyError(
                f"no secret key with id {sealed.kid!r} is configured (configured: {known}); "
                f"add it to {ENV_VAR} / secret_keys",
                kid=sealed.kid,
            )
        try:
            raw = _b64decode(sealed.ct)
            plaintext = aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _AAD)
        except (InvalidTag, binascii.Error, ValueError, UnicodeEncodeError) as exc:
            raise SecretKeyError(
                f"secret key {sealed.kid!r} does not open a stored secret (wrong key for this "
                f"id, or the value was altered); check {ENV_VAR} / secret_keys",
                kid=sealed.kid,
            ) from exc
        return codec.loads(plaintext)


def seal_names(
    values: Mapping[str, Any], names: Iterable[str], seal: Any
) -> dict[str, Any]:
    """``values`` with the entries named in ``names`` passed through ``seal``
    (docs/security.md, "What is encrypted").

    Args:
        values: a mapping (inputs, step arguments).
        names: the names to seal (absent names are ignored).
        seal: ``value -> sealed value`` (usually :meth:`Keyring.seal`).

    Returns:
        A new dict; values not named are the same objects.
    """
    secret = set(names)
    return {k: (seal(v) if k in secret else v) for k, v in values.items()}


class SecretOpener(Protocol):
    """Anything that opens a :class:`Sealed` value (a :class:`Keyring`, or a wrapper that
    builds one lazily)."""

    def open(self, sealed: Sealed) -> Any:
        """Return the plaintext value of ``sealed``.

        Raises:
            SecretKeyError: the value cannot be opened.
        """
        ...


def open_values(value: Any, keyring: SecretOpener) -> Any:
    """Replace every :class:`Sealed` inside ``value`` (dicts, lists, tuples) by its plaintext
    (docs/security.md, "Where secrets are decrypted").

    Args:
        value: any decoded value.
        keyring: the keys to open with.

    Returns:
        ``value`` itself when it holds nothing sealed, else a copy with sealed values opened.

    Raises:
        SecretKeyError: a sealed value cannot be opened with ``keyring``.
    """
    if isinstance(value, Sealed):
        return keyring.open(value)
    if isinstance(value, dict):
        opened = {k: open_values(v, keyring) for k, v in value.items()}
        return value if all(opened[k] is value[k] for k in value) else opened
    if isinstance(value, list):
        items = [open_values(v, keyring) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, tuple):
        items = [open_values(v, keyring) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else tuple(items)
    return value
