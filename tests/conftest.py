"""How the suite spreads over pytest-xdist's workers (``scripts/test.sh`` runs one per core, two by default)."""
from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups (``--dist loadgroup``)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each module's tests run in one worker, so a module's fixtures (runs it trains once for all its
    tests) are made once; every Ray test runs in one worker, so no two local Ray clusters share the cores."""
    for item in items:
        group = "ray" if item.get_closest_marker("ray") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
