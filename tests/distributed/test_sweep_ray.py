"""rlpipe sweep --backend ray: each run a Ray task on the cluster, its result sent back to the driver."""
from __future__ import annotations

import pytest

from rlpipe.tools.results import read_results
from rlpipe.tools.sweep import Placement, Sweep, run_sweep
from tests.tiny_run import TINY_RUN

pytestmark = pytest.mark.ray


def test_two_runs_as_ray_tasks(ray_cluster, tmp_path):
    sweep = Sweep(("cartpole-dqn",), (0, 1), tuple(TINY_RUN), tmp_path / "sweep")
    outcomes = run_sweep(sweep, Placement("ray", jobs=2))
    assert sorted(o.run.seed for o in outcomes) == [0, 1] and all(o.returncode == 0 for o in outcomes)
    records = read_results(tmp_path / "sweep" / "results.jsonl")
    assert sorted(r.seed for r in records) == [0, 1] and all(r.env_step[-1] == 200 for r in records)
    assert run_sweep(sweep, Placement("ray", jobs=2)) == []  # recorded: nothing runs again
