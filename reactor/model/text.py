"""Untrusted text in terminals and logs: :func:`printable` escapes what could forge a line or
drive a terminal, and :func:`escaping_logger` applies it to every argument a logger formats.

Job ids, run ids and reactor names taken from a message, dead-letter reasons and bodies, stored
reactor names and statuses are hostile input: a ``\\n`` in a job id would forge a second log
line, an ANSI escape would drive the terminal, a right-to-left override (U+202E) would show a
line reordered. Every CLI text view (docs/workers.md, "Dead letters") and the worker's log lines
(docs/workers.md, "Running workers") pass them through :func:`printable`.
"""

from __future__ import annotations

import json
import logging
import unicodedata
from collections.abc import Mapping
from typing import Any

__all__ = ["EscapingLogger", "escaping_logger", "printable"]

#: Unicode categories :func:`printable` escapes: controls (C0, DEL, C1), format characters
#: (bidi overrides and isolates, zero-width characters), line and paragraph separators and lone
#: surrogates.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str, as_json: bool = False) -> str:
    if as_json:
        return json.dumps(char)[1:-1]  # \n, \u202e, a surrogate pair beyond U+FFFF
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str, *, as_json: bool = False) -> str:
    """``text`` safe for one line of a terminal or a log: every control character (C0 and C1,
    including ``\\n``, ``\\r`` and ``\\t``), Unicode format character (category ``Cf``: bidi
    overrides such as U+202E, zero-width spaces and joiners), line/paragraph separator and
    lone surrogate is shown as a ``repr``-like escape (``\\n``, ``\\x1b``, ``\\u202e``).

    Backslashes are left as they are (a path stays readable), so ``\\n`` in the output may
    also be a literal backslash and ``n``; what matters is that no character can break the
    line or reorder it.

    Args:
        text: untrusted text.
        as_json: ``text`` is JSON (``json.dumps(..., ensure_ascii=False)``): escape in JSON's
            syntax (``\u202e``, ``\u0085``), so the output stays valid JSON that reads the
            same.

    Returns:
        The escaped text (``text`` itself when nothing needed escaping).
    """
    if text.isprintable() and not any(
        unicodedata.category(ch) in _ESCAPED_CATEGORIES for ch in text if not ch.isascii()
    ):
        return text
    return "".join(
        _escape(ch, as_json) if unicodedata.category(ch) in _ESCAPED_CATEGORIES else ch
        for ch in text
    )


def _safe_arg(value: object) -> object:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, BaseException):
        return printable(str(value))
    return value


class EscapingLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose ``%s`` arguments are passed through :func:`printable`: strings and
    exceptions (as their message) are escaped, numbers and other values go through as they
    are. The message template is trusted (it is code); a traceback (``exc_info``) is not
    touched."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, {})

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        """Pass the keyword arguments through unchanged (no ``extra`` is added)."""
        return msg, kwargs

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        """Log ``msg % args`` with every string argument escaped (:func:`printable`)."""
        if not self.isEnabledFor(level):
            return
        if len(args) == 1 and isinstance(args[0], Mapping):
            args = ({key: _safe_arg(value) for key, value in args[0].items()},)
        else:
            args = tuple(_safe_arg(arg) for arg in args)
        kwargs.setdefault("stacklevel", 1)
        kwargs["stacklevel"] += 1  # report the caller's line, not this method's
        self.logger.log(level, msg, *args, **kwargs)


def escaping_logger(name: str) -> EscapingLogger:
    """The logger ``name`` wrapped in an :class:`EscapingLogger` (same name, level, handlers:
    ``caplog`` and logging configuration see it as ``logging.getLogger(name)``)."""
    return EscapingLogger(logging.getLogger(name))
