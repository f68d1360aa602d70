"""``benchmarks/offline_returns.py``: a dataset's whole episodes as d3rlpy's arrays, the ratio of normalised
scores, and a quick run without d3rlpy that still reads rlpipe's results.

d3rlpy lives in a virtualenv of its own (it pins gymnasium 1.0.0), which the test environment does not
have: the quick run passes ``--d3rlpy-python none`` and checks that one line says d3rlpy's side was
skipped and its figures are null. Where that virtualenv exists (``peers.D3RLPY_PYTHON``), one more test
trains d3rlpy for a few updates and reads its run results back through rlpipe's reader.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlpipe.data.dataset import Dataset, write_dataset
from rlpipe.tools.datasets import rollout_dataset
from rlpipe.tools.results import RunResult, read_results, write_results
from tests.benchmark_scripts import benchmark_module

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "offline_returns.py"


D3RLPY_PYTHON = benchmark_module("peers").D3RLPY_PYTHON  # offline_returns imports peers by that name
offline_returns = benchmark_module("offline_returns")

PENDULUM_CONFIGS = ["--td3bc-config", "docs/results/configs/pendulum-medium-td3bc.yaml",
                    "--iql-config", "docs/results/configs/pendulum-medium-iql.yaml"]


@pytest.fixture(scope="module")
def pendulum_dataset(tmp_path_factory) -> Path:
    """Four random Pendulum episodes (200 steps each), with reference returns."""
    out = tmp_path_factory.mktemp("data") / "pendulum-random"
    rollout_dataset("pendulum-sac", out, 4, random_actions=True, num_envs=2, seed=3,
                    reference_returns={"random": -1200.0, "expert": -150.0})
    return out


def quick(*args: str) -> list[str]:
    run = subprocess.run([sys.executable, str(SCRIPT), "--quick", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, f"offline_returns.py --quick exited with {run.returncode}:\n{run.stderr[-3000:]}"
    return run.stdout.strip().splitlines()


def test_whole_episodes_become_contiguous_rows_with_their_ends(tmp_path: Path) -> None:
    """Two envs' rows interleaved; env 0 ends one episode terminated and one truncated, env 1's data stops
    inside an episode: d3rlpy gets env 0's two episodes, each contiguous and in time order."""
    from gymnasium import spaces

    env_id = np.array([0, 1, 0, 1, 0, 0, 1])
    columns = {"obs": np.arange(7, dtype=np.float32)[:, None].repeat(2, 1),
               "action": np.zeros((7, 1), np.float32), "reward": np.arange(7, dtype=np.float32),
               "next_obs": np.zeros((7, 2), np.float32), "terminated": np.array([0, 0, 1, 0, 0, 0, 0], bool),
               "truncated": np.array([0, 0, 0, 0, 0, 1, 0], bool), "env_id": env_id}
    path = tmp_path / "d"
    write_dataset(path, columns, spaces.Box(-9, 9, (2,), np.float32), spaces.Box(-1, 1, (1,), np.float32),
                  "Pendulum-v1", {"source": "test"})
    folder = tmp_path / "arrays"
    folder.mkdir()
    assert offline_returns.write_arrays(Dataset.open(path), folder) == 4
    arrays = {name: np.load(folder / f"{name}.npy") for name in offline_returns.COLUMN_FILES}
    np.testing.assert_array_equal(arrays["rewards"], [0, 2, 4, 5])  # rows 0, 2 | 4, 5 of env 0
    np.testing.assert_array_equal(arrays["observations"][:, 0], [0, 2, 4, 5])
    np.testing.assert_array_equal(arrays["terminals"], [0, 1, 0, 0])
    np.testing.assert_array_equal(arrays["timeouts"], [0, 0, 0, 1])


def test_image_datasets_are_refused_in_one_line(tmp_path: Path) -> None:
    from gymnasium import spaces

    from rlpipe.data.dataset import DatasetError

    n = 3
    columns = {"obs": np.zeros((n, 1, 4, 4), np.uint8), "action": np.zeros(n, np.int64),
               "reward": np.zeros(n, np.float32), "next_obs": np.zeros((n, 1, 4, 4), np.uint8),
               "terminated": np.array([0, 0, 1], bool), "truncated": np.zeros(n, bool), "env_id": np.zeros(n, np.int64)}
    write_dataset(tmp_path / "img", columns, spaces.Box(0, 255, (1, 4, 4), np.uint8), spaces.Discrete(2), "X-v0",
                  {"source": "test"})
    with pytest.raises(DatasetError, match="vector observations"):
        offline_returns.write_arrays(Dataset.open(tmp_path / "img"), tmp_path)


def test_score_ratio_normalises_and_refuses_scores_at_or_below_zero() -> None:
    reference = {"random": -1200.0, "expert": -200.0}
    assert offline_returns.score_ratio(-400.0, -700.0, reference) == pytest.approx(0.8 / 0.5)
    assert offline_returns.score_ratio(-400.0, -1300.0, reference) is None  # d3rlpy below random play
    assert offline_returns.score_ratio(30.0, 20.0, None) == pytest.approx(1.5)
    assert offline_returns.score_ratio(None, 20.0, None) is None


def test_quick_run_without_d3rlpy_reads_rlpipes_results(pendulum_dataset: Path, tmp_path: Path) -> None:
    ours = tmp_path / "rlpipe.jsonl"
    write_results(ours, [RunResult(group="pendulum-medium-td3bc", task="Pendulum-v1", seed=seed, env_step=[10],
                                   value=[-500.0], final_eval=final, settings={"algorithm": "td3_bc"})
                         for seed, final in enumerate((-400.0, -600.0))])
    lines = quick(str(pendulum_dataset), "--d3rlpy-python", "none", "--against", str(ours), *PENDULUM_CONFIGS)
    assert "d3rlpy side skipped: --d3rlpy-python none" in lines
    figures = json.loads(lines[-1])
    assert figures["rlpipe_td3bc_final_mean"] == pytest.approx(-500.0)
    assert figures["rlpipe_iql_final_mean"] is None  # no IQL runs in the file
    assert all(figures[key] is None for key in ("d3rlpy_td3bc_final_mean", "td3bc_score_d3rlpy_ratio",
                                                "d3rlpy_iql_final_mean", "iql_score_d3rlpy_ratio"))


@pytest.mark.skipif(not Path(D3RLPY_PYTHON).is_file(), reason=f"d3rlpy's own virtualenv ({D3RLPY_PYTHON}) is not "
                    "on this machine (see benchmarks/peers.py for how to make it)")
def test_d3rlpys_runs_enter_the_results_format(pendulum_dataset: Path, tmp_path: Path) -> None:
    results = tmp_path / "d3rlpy.jsonl"
    lines = quick(str(pendulum_dataset), "--results", str(results), *PENDULUM_CONFIGS)
    runs = read_results(results)
    assert [(r.group, r.library, r.counter, r.budget_env_steps) for r in runs] == [
        ("d3rlpy-td3bc", "d3rlpy", "train_iter", 200), ("d3rlpy-iql", "d3rlpy", "train_iter", 200)]
    assert [r.settings["algorithm"] for r in runs] == ["td3_bc", "iql"]
    assert all(r.env_step == [100, 200] and r.final_eval_episodes == 2 and -2000 < r.final < 0 for r in runs)
    figures = json.loads(lines[-1])
    assert figures["d3rlpy_td3bc_final_mean"] == pytest.approx(runs[0].final)


def test_a_missing_dataset_is_one_line_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-dataset"
    run = subprocess.run([sys.executable, str(SCRIPT), str(missing), "--quick", "--d3rlpy-python", "none"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.endswith(f"error: dataset {missing} does not exist (or is not a directory)")
