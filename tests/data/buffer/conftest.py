"""Every buffer test runs on both data layouts: separate columns, and packed records."""

from __future__ import annotations

import pytest

from rlpipe.data.buffer import storage


@pytest.fixture(autouse=True, params=["columns", "records"])
def layout(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The data layout of buffers made in this test ("records": packed whatever their size)."""
    monkeypatch.setattr(storage, "PACK_MIN_BYTES", 0 if request.param == "records" else storage.PACK_MIN_BYTES)
    return request.param
