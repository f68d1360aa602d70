"""The collect half on its own (no Ray cluster): fragments, counts, weights; what a missing or unreachable Ray says."""
from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from rlpipe.config import ConfigError, load_config
from rlpipe.distributed import CollectorHalf, import_ray
from rlpipe.distributed.fragment import merge_episode_figures
from rlpipe.errors import MissingDependencyError
from rlpipe.framework.middleware.functional.explorer import epsilon_schedule
from rlpipe.recipes.build import build_parts
from tests.cli_errors import one_line_error
from tests.distributed.conftest import closed_loopback_port

SMALL = ["env.collector_env_num=4", "policy.collect.n_sample=40", "policy.random_collect_size=0", "policy.nstep=1"]


@pytest.fixture
def cfg():
    with build_parts(load_config("cartpole-dqn", SMALL)) as parts:
        return parts.cfg  # model sizes filled in, as the learner hands it to collectors


def test_fragments_count_env_steps_and_carry_the_transitions(cfg) -> None:
    half = CollectorHalf(cfg, index=0)
    try:
        first, second = half.collect(0), half.collect(0)
    finally:
        half.close()
    assert (first.sequence, second.sequence) == (0, 1)
    assert first.env_steps == second.env_steps == 40  # 10 vector steps of 4 envs each
    # the newest vector step is held until the next shows whether it failed: 36 rows, then 40
    assert len(first.transitions["reward"]) == 36 and len(second.transitions["reward"]) == 40
    assert first.policy_version == 0 and first.eps == pytest.approx(1.0)
    assert second.eps < first.eps  # the schedule follows env steps


def test_the_run_s_env_step_drives_the_schedule(cfg) -> None:
    eps = cfg.policy.other.eps
    half = CollectorHalf(cfg, index=0)
    try:
        late = half.collect(learner_env_step=50_000)
    finally:
        half.close()
    assert late.eps == pytest.approx(epsilon_schedule(eps.type, eps.start, eps.end, eps.decay)(50_000))
    assert late.env_steps == 40  # counted from where the run is, not from 0


def test_weights_replace_the_acting_network_but_not_the_exploration_stream(cfg) -> None:
    half = CollectorHalf(cfg, index=0)
    try:
        policy = half._policy
        rng_before = policy.state_dict()["rng"]
        weights = {"model": {k: torch.full_like(v, 0.5) for k, v in policy.model.state_dict().items()}}
        fragment = half.collect(0, (7, weights))
        assert fragment.policy_version == 7
        assert all(torch.all(v == 0.5) for v in policy.model.state_dict().values())
        assert policy.state_dict()["rng"] != rng_before  # it explored with its own generator, not reset by weights
    finally:
        half.close()


def test_collectors_explore_on_streams_of_their_own(cfg) -> None:
    halves = [CollectorHalf(cfg, index=i) for i in range(2)]
    try:
        a, b = (half.collect(0) for half in halves)
    finally:
        for half in halves:
            half.close()
    assert not np.array_equal(a.transitions["obs"], b.transitions["obs"])


def test_collectors_number_their_envs_apart_and_climb_the_epsilon_ladder() -> None:
    ladder = ["distributed.backend=ray", "distributed.collectors=3", "distributed.epsilon_ladder=true"]
    with build_parts(load_config("cartpole-dqn", SMALL)) as parts:
        cfg = parts.cfg.model_copy(update={"distributed": load_config("cartpole-dqn", ladder).distributed})
    fragments = []
    for i in range(3):
        half = CollectorHalf(cfg, index=i)
        try:
            fragments.append(half.collect(0))
        finally:
            half.close()
    assert [sorted(set(f.transitions["env_id"].tolist())) for f in fragments] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert [f.eps for f in fragments] == pytest.approx([0.4, 0.4 ** 4.5, 0.4 ** 8])  # Ape-X's 0.4 ** (1 + 7i/2)


@pytest.mark.parametrize(("overrides", "why"), [
    (["distributed.epsilon_ladder=true"], "distributed.backend 'local' has no use for it"),
    (["distributed.epsilon_ladder=true", "distributed.backend=ray", "policy.model.noisy=true", "policy.type=c51"],
     "policy.type 'c51' with distributed.backend 'ray' has no use for it"),
])
def test_an_epsilon_ladder_where_it_means_nothing_is_one_line(overrides, why) -> None:
    with pytest.raises(ConfigError, match=r"config key 'distributed\.epsilon_ladder' needs collectors on Ray") as err:
        load_config("cartpole-dqn", overrides)
    assert why in str(err.value) and "\n" not in str(err.value)


def test_backend_ray_without_ray_is_one_line(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails as when it is not installed
    with pytest.raises(MissingDependencyError, match=r"scripts/setup\.sh ray"):
        import_ray()
    err = one_line_error(capsys, ["train", "cartpole-dqn", "--backend", "ray", "--run-dir", str(tmp_path / "r")])
    assert "distributed.backend" in err and "ray" in err


def test_episode_figures_of_collectors_merge_counts_summed_and_means_averaged() -> None:
    merged = merge_episode_figures([
        {"episode_return_mean": 10.0, "episode_length_mean": 20.0, "failed_steps": 1},
        {"episode_return_mean": 30.0, "episode_length_mean": 40.0, "success_rate": 0.5, "failed_steps": 2},
    ])
    assert merged == {"episode_return_mean": 20.0, "episode_length_mean": 30.0, "success_rate": 0.5, "failed_steps": 3}
    assert merge_episode_figures([{}, {}]) == {}  # no episode has ended yet


def test_the_learner_of_a_ray_run_makes_no_collector_envs() -> None:
    with build_parts(load_config("cartpole-dqn", [*SMALL, "distributed.backend=ray"])) as parts:
        assert parts.local_collector_env is None
        assert parts.cfg.policy.model.obs_shape == 4  # sizes come from the evaluator's envs
        with pytest.raises(ConfigError, match=r"distributed\.backend.*collector actors"):
            parts.collector_env  # noqa: B018


def test_her_on_ray_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"distributed\.backend"):
        load_config("bitflip-her-dqn", ["distributed.backend=ray"])


def test_an_address_where_nothing_listens_is_one_line_and_leaves_no_run_dir(capsys, tmp_path) -> None:
    run_dir = tmp_path / "r"
    err = one_line_error(capsys, ["train", "cartpole-dqn", "--backend", "ray", "--address",
                                  f"127.0.0.1:{closed_loopback_port()}", "--run-dir", str(run_dir)])
    assert "distributed.address" in err and "ray start --head" in err
    assert not run_dir.exists()  # checked before the run directory is made
