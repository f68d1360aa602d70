"""Step budgets that mean what they say: ``run.max_env_step`` is overrun by less than one vector
step, a random warm-up cannot outlast it, a finished run is not trained again by ``resume``, and
``--collectors`` without the Ray backend is refused."""
from __future__ import annotations

import json

import pytest

from rlpipe.cli.main import main
from rlpipe.config import ConfigError, load_config
from tests.cli_errors import one_line_error
from tests.tiny_run import TINY_RUN

ENVS = 4
TINY = [*TINY_RUN, f"env.collector_env_num={ENVS}", "run.save_freq=5"]


def test_a_run_stops_within_one_vector_step_of_its_cap(tmp_path):
    run_dir = tmp_path / "run"
    assert main(["train", "cartpole-dqn", *TINY, "run.max_env_step=90", "--run-dir", str(run_dir)]) == 0
    env_step = json.loads((run_dir / "summary.json").read_text())["env_step"]
    assert 90 <= env_step < 90 + ENVS  # 40 env steps a collection would have made it 120


def test_a_random_warm_up_longer_than_the_cap_is_one_line():
    with pytest.raises(ConfigError, match=r"^config: policy\.random_collect_size \(1000\) is larger than "
                                          r"run\.max_env_step \(800\)"):
        load_config("pendulum-td3", ["run.max_env_step=800"])


def test_resuming_a_run_that_reached_its_cap_says_so_and_trains_nothing(tmp_path, caplog):
    run_dir = tmp_path / "run"
    assert main(["train", "cartpole-dqn", *TINY, "--run-dir", str(run_dir)]) == 0
    before = {name: (run_dir / name).read_bytes() for name in ("metrics.jsonl", "summary.json")}
    checkpoints = sorted(p.name for p in run_dir.rglob("*") if p.is_file())
    assert main(["resume", str(run_dir)]) == 0
    assert f"{run_dir} already reached run.max_env_step=200 (at env step 200): nothing to train" in caplog.text
    assert {name: (run_dir / name).read_bytes() for name in before} == before
    assert sorted(p.name for p in run_dir.rglob("*") if p.is_file()) == checkpoints


@pytest.mark.parametrize("flags", [["--collectors", "2"], ["--collectors", "2", "--backend", "local"],
                                   ["--address", "127.0.0.1:6379"]])
def test_ray_flags_without_the_ray_backend_are_one_line(capsys, flags):
    err = one_line_error(capsys, ["train", "cartpole-dqn", *TINY, *flags])
    assert f"{flags[-2] if flags[0] == '--address' else '--collectors'} needs --backend ray" in err
