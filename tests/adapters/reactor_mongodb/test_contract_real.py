"""The whole contract suite on a real MongoDB, when ``$REACTOR_TEST_MONGODB_URL`` is exported.

scripts/test runs the suite on mongomock and on SecantusDB through ``PYTEST_RUNS``; a real
server is optional (none can be installed on CI), so its run lives here: the contract classes
are subclassed (docs/contract-suite.md "Subclassing in your own test suite") with the URL
fixtures pointing at ``$REACTOR_TEST_MONGODB_URL``. Without the variable this module defines
no tests.
"""

from __future__ import annotations

import os

import pytest
from reactor_contract.test_claims import ClaimsContract
from reactor_contract.test_concurrency import ConcurrencyContract
from reactor_contract.test_contexts import ContextsContract
from reactor_contract.test_locks import LocksContract
from reactor_contract.test_map_rollbacks import MapRollbacksContract
from reactor_contract.test_maps import MapsContract
from reactor_contract.test_ordered_locks import OrderedLocksContract
from reactor_contract.test_periods import PeriodsContract
from reactor_contract.test_rate_limits import RateLimitsContract
from reactor_contract.test_routers import RoutersContract
from reactor_contract.test_semaphores import SemaphoresContract
from reactor_contract.test_step_results import StepResultsContract
from reactor_contract.test_sweeps import SweepsContract

REAL_URL = os.environ.get("REACTOR_TEST_MONGODB_URL", "").strip()

if REAL_URL:

    @pytest.fixture
    def reactor_storage_url() -> str:
        """The real MongoDB (overrides the plugin's ``--reactor-storage`` lookup)."""
        return REAL_URL

    @pytest.fixture
    def reactor_router_url() -> str:
        """The real MongoDB (overrides the plugin's ``--reactor-router`` lookup)."""
        return REAL_URL

    class TestRealClaims(ClaimsContract): ...

    class TestRealConcurrency(ConcurrencyContract): ...

    class TestRealContexts(ContextsContract): ...

    class TestRealLocks(LocksContract): ...

    class TestRealMapRollbacks(MapRollbacksContract): ...

    class TestRealMaps(MapsContract): ...

    class TestRealOrderedLocks(OrderedLocksContract): ...

    class TestRealPeriods(PeriodsContract): ...

    class TestRealRateLimits(RateLimitsContract): ...

    class TestRealRouters(RoutersContract): ...

    class TestRealSemaphores(SemaphoresContract): ...

    class TestRealStepResults(StepResultsContract): ...

    class TestRealSweeps(SweepsContract): ...
