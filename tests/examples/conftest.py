"""Makes the repository root importable so the tests can ``import examples...``.

``examples/`` is not part of the installed ``reactor`` package; ``python -m`` puts the working
directory on ``sys.path`` but the ``pytest`` script does not.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
