"""``rlpipe plot --group``: one mean curve per group of seeds, with a band, on a common env-step grid."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlpipe.cli.main import main
from rlpipe.utils.plot import group_curves, group_name

matplotlib = pytest.importorskip("matplotlib")


def fake_run(run_dir: Path, curve: dict[int, float], exp_name: str = "x") -> Path:
    """A run directory holding only what plotting reads: evaluation records and a config."""
    run_dir.mkdir(parents=True)
    records = [{"kind": "train", "env_step": 1, "total_loss": 0.5}]
    records += [{"kind": "eval", "env_step": step, "return_mean": value} for step, value in curve.items()]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run_dir / "config.yaml").write_text(f"exp_name: {exp_name}\n")
    return run_dir


@pytest.fixture
def runs(tmp_path) -> list[Path]:
    return [
        fake_run(tmp_path / "a-seed0", {0: 10.0, 100: 20.0, 200: 40.0}),
        fake_run(tmp_path / "a-seed1", {0: 20.0, 50: 30.0, 150: 50.0, 250: 0.0}),  # other steps: interpolated
        fake_run(tmp_path / "b-seed0", {0: 1.0, 200: 3.0}),
    ]


def test_groups_are_names_without_the_seed_suffix_else_exp_name(tmp_path):
    assert group_name(tmp_path / "cartpole-dqn-seed3") == "cartpole-dqn"
    assert group_name(tmp_path / "cartpole-dqn-seed3-2") == "cartpole-dqn"  # default_run_dir's "taken" suffix
    assert group_name(fake_run(tmp_path / "trial-4", {0: 1.0}, exp_name="pendulum-sac")) == "pendulum-sac"


def test_mean_of_seeds_interpolated_onto_the_common_grid(runs):
    a, b = group_curves(runs, band="se")
    assert a.name == "a" and [r.name for r in a.runs] == ["a-seed0", "a-seed1"] and b.name == "b"
    # steps where either seed evaluated, up to the last step both reached (200: no extrapolation)
    np.testing.assert_array_equal(a.env_step, [0, 50, 100, 150, 200])
    seed0 = np.array([10.0, 15.0, 20.0, 30.0, 40.0])
    seed1 = np.array([20.0, 30.0, 40.0, 50.0, 25.0])
    np.testing.assert_allclose(a.mean, (seed0 + seed1) / 2)
    se = np.abs(seed0 - seed1) / 2  # sample std of two values over sqrt(2)
    np.testing.assert_allclose(a.high - a.mean, se)
    np.testing.assert_allclose(a.mean - a.low, se)
    np.testing.assert_allclose(b.mean, [1.0, 3.0])
    np.testing.assert_allclose(b.high, b.mean)  # one run: no spread


def test_minmax_band(runs):
    a = group_curves(runs, band="minmax")[0]
    np.testing.assert_allclose(a.low, [10.0, 15.0, 20.0, 30.0, 25.0])
    np.testing.assert_allclose(a.high, [20.0, 30.0, 40.0, 50.0, 40.0])


def test_the_drawn_lines_are_the_group_means(runs, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    drawn = {}
    original_close = plt.close

    def keep_lines(fig):  # read the figure back just before plot_runs closes it
        for line in fig.axes[0].get_lines():
            drawn[line.get_label()] = (line.get_xdata(), line.get_ydata())
        original_close(fig)

    monkeypatch.setattr(plt, "close", keep_lines)
    out = tmp_path / "group.png"
    assert main(["plot", *map(str, runs), "--group", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(drawn) == {"a (2 runs)", "b (1 run)"}
    np.testing.assert_array_equal(drawn["a (2 runs)"][0], [0, 50, 100, 150, 200])
    np.testing.assert_allclose(drawn["a (2 runs)"][1], [15.0, 22.5, 30.0, 40.0, 32.5])


def test_a_resumed_run_that_logged_a_step_again_keeps_the_later_record(tmp_path):
    run = fake_run(tmp_path / "r-seed0", {0: 1.0, 100: 2.0})
    with (run / "metrics.jsonl").open("a") as f:  # resumed from the checkpoint at step 0
        f.write(json.dumps({"kind": "eval", "env_step": 100, "return_mean": 5.0}) + "\n")
    np.testing.assert_allclose(group_curves([run])[0].mean, [1.0, 5.0])
