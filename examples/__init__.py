"""Runnable examples of reactor sagas.

Each sub-package is a self-contained demo that runs with ``python -m examples.<name>`` from the
repository root. Examples are not part of the installed ``reactor`` package.
"""
