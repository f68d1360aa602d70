"""HER relabelling. Episodes here encode where things come from: the state of ``obs`` at
step t of episode e is (e, t), of ``next_obs`` (e, t + 1), and the original desired goal is
(-1, -1), never achieved. A relabelled goal (e', g + 1) therefore names the episode e' and
step g it was taken from."""

import numpy as np
import pytest

from rlpipe.config.schema import HerConfig
from rlpipe.reward_model import HerRewardModel, equal_goal_reward

LENGTHS = (3, 7, 12)


def make_episode(e: int, T: int, terminal: bool = False) -> dict[str, np.ndarray]:
    t = np.arange(T, dtype=np.float32)
    goal = np.full((T, 2), -1.0, dtype=np.float32)
    obs = np.concatenate([np.stack([np.full(T, e, np.float32), t], axis=1), goal], axis=1)
    next_obs = np.concatenate([np.stack([np.full(T, e, np.float32), t + 1], axis=1), goal], axis=1)
    terminated = np.zeros(T, dtype=bool)
    terminated[-1] = terminal
    return {
        "obs": obs,
        "action": np.arange(T, dtype=np.int64) + 100 * e,
        "reward": np.zeros(T, dtype=np.float32),
        "next_obs": next_obs,
        "terminated": terminated,
        "truncated": ~terminated & (np.arange(T) == T - 1),
    }


def episodes(lengths=LENGTHS) -> list[dict[str, np.ndarray]]:
    return [make_episode(e, T) for e, T in enumerate(lengths)]


def decode(batch: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """(episode, step t, goal episode, goal step g) of every row."""
    e, t = batch["obs"][:, 0].astype(int), batch["obs"][:, 1].astype(int)
    ge, g = batch["obs"][:, 2].astype(int), batch["obs"][:, 3].astype(int) - 1
    return e, t, ge, g


def model(strategy: str = "future", **cfg) -> HerRewardModel:
    return HerRewardModel({"her_strategy": strategy, **cfg})


def relabel(strategy: str, seed: int = 0, **cfg) -> dict[str, np.ndarray]:
    return model(strategy, **cfg).relabel_batch(episodes(), np.random.default_rng(seed))


@pytest.mark.parametrize("strategy", ["final", "future", "episode"])
def test_new_goal_is_an_achieved_goal_of_the_same_episode_in_the_right_range(strategy):
    batch = relabel(strategy, her_replay_k=8)
    e, t, ge, g = decode(batch)
    T = np.array(LENGTHS)[e]
    assert np.array_equal(ge, e)
    assert np.array_equal(batch["next_obs"][:, 2:], batch["obs"][:, 2:])  # both goals relabelled alike
    if strategy == "final":
        assert np.array_equal(g, T - 1)
    elif strategy == "future":
        assert ((g >= t) & (g < T)).all()
        assert (g > t).any()
    else:
        assert ((g >= 0) & (g < T)).all()
        assert (g < t).any() and (g > t).any()


def test_future_goals_cover_every_later_step():
    batch = relabel("future", her_replay_k=200)
    e, t, _, g = decode(batch)
    first_of_longest = (e == 2) & (t == 0)
    assert set(g[first_of_longest]) == set(range(12))
    last = (e == 2) & (t == 11)
    assert set(g[last]) == {11}


@pytest.mark.parametrize("strategy", ["final", "future", "episode"])
def test_rewards_and_termination_follow_the_goal_reward(strategy):
    batch = relabel(strategy, her_replay_k=4)
    _, t, _, g = decode(batch)
    expected = equal_goal_reward(batch["next_obs"][:, :2], batch["next_obs"][:, 2:])
    np.testing.assert_array_equal(batch["reward"], expected)
    np.testing.assert_array_equal(batch["reward"], (g == t).astype(np.float32))
    np.testing.assert_array_equal(batch["terminated"], g == t)
    assert batch["reward"].dtype == np.float32 and batch["terminated"].dtype == bool


def test_other_fields_are_carried_from_the_sampled_step():
    batch = relabel("future", her_replay_k=2)
    e, t, _, _ = decode(batch)
    np.testing.assert_array_equal(batch["action"], 100 * e + t)
    np.testing.assert_array_equal(batch["truncated"], t == np.array(LENGTHS)[e] - 1)
    np.testing.assert_array_equal(batch["next_obs"][:, 1], t + 1)
    assert batch["obs"].dtype == np.float32 and batch["action"].dtype == np.int64


def test_terminal_on_success_false_keeps_stored_termination():
    eps = [make_episode(0, 5, terminal=True)]
    her = HerRewardModel({"her_strategy": "final", "her_replay_k": 1}, terminal_on_success=False)
    batch = her.relabel_batch(eps, np.random.default_rng(0))
    np.testing.assert_array_equal(batch["terminated"], eps[0]["terminated"])
    assert batch["reward"][-1] == 1.0


@pytest.mark.parametrize(("k", "spe"), [(1, None), (3, None), (1, 4), (2, 5)])
def test_counts_follow_her_replay_k_and_sample_per_episode(k, spe):
    her = model("future", her_replay_k=k, sample_per_episode=spe)
    batch = her.relabel_batch(episodes(), np.random.default_rng(0))
    per_episode = [spe or T for T in LENGTHS]
    assert all(len(v) == k * sum(per_episode) for v in batch.values())
    e, _, _, _ = decode(batch)
    assert np.array_equal(np.bincount(e), k * np.array(per_episode))

    lists = her.estimate(make_episode(0, 7), rng=np.random.default_rng(0))
    assert len(lists) == k and all(len(copy) == (spe or 7) for copy in lists)
    assert set(lists[0][0]) == {"obs", "action", "reward", "next_obs", "terminated", "truncated"}


def test_sample_per_episode_draws_steps_uniformly():
    batch = relabel("final", sample_per_episode=3000)
    e, t, _, _ = decode(batch)
    counts = np.bincount(t[e == 2], minlength=12)
    assert counts.min() > 3000 / 12 * 0.75 and counts.max() < 3000 / 12 * 1.25


def test_estimate_copies_are_ordered_and_each_relabelled_independently():
    her = model("episode", her_replay_k=3)
    lists = her.estimate(make_episode(4, 12), rng=np.random.default_rng(1))
    for copy in lists:
        assert [int(tr["obs"][1]) for tr in copy] == list(range(12))
        assert all(int(tr["obs"][2]) == 4 for tr in copy)
    goals = [[int(tr["obs"][3]) for tr in copy] for copy in lists]
    assert goals[0] != goals[1] != goals[2]


def test_estimate_accepts_a_list_of_transition_dicts():
    columnar = make_episode(1, 7)
    transitions = [{key: value[i] for key, value in columnar.items()} for i in range(7)]
    her = model("future", her_replay_k=2)
    from_columns = her.estimate(columnar, rng=np.random.default_rng(5))
    from_list = her.estimate(transitions, rng=np.random.default_rng(5))
    for a, b in zip(
        [tr for copy in from_columns for tr in copy], [tr for copy in from_list for tr in copy], strict=True
    ):
        assert a.keys() == b.keys() and all(np.array_equal(a[key], b[key]) for key in a)


def test_same_seed_same_batch_and_inputs_untouched():
    eps = episodes()
    before = {key: value.copy() for key, value in eps[1].items()}
    her = model("future", her_replay_k=2, sample_per_episode=4)
    a = her.relabel_batch(eps, np.random.default_rng(9))
    b = her.relabel_batch(eps, np.random.default_rng(9))
    assert all(np.array_equal(a[key], b[key]) for key in a)
    assert all(np.array_equal(before[key], eps[1][key]) for key in before)


def test_custom_split_merge_and_reward_are_used():
    """Layout [goal | state] and a distance reward, given per call and at construction."""

    def split(x):
        return x[..., 2:], x[..., :2], x[..., 2:]

    def merge(state, goal):
        return np.concatenate([goal, state], axis=-1)

    def reward(achieved, goal):
        return -np.abs(achieved - goal).sum(axis=-1)

    eps = [
        {**ep, "obs": np.roll(ep["obs"], 2, axis=1), "next_obs": np.roll(ep["next_obs"], 2, axis=1)}
        for ep in episodes()
    ]
    per_call = model("future", her_replay_k=3).relabel_batch(
        eps, np.random.default_rng(2), merge, split, reward
    )
    her = HerRewardModel(
        {"her_strategy": "future", "her_replay_k": 3},
        merge_func=merge,
        split_func=split,
        goal_reward_func=reward,
    )
    built_in = her.relabel_batch(eps, np.random.default_rng(2))
    for batch in (per_call, built_in):
        t, g = batch["obs"][:, 3], batch["obs"][:, 1] - 1
        np.testing.assert_array_equal(batch["obs"][:, 2], batch["obs"][:, 0])  # goal taken from same episode
        assert (g >= t).all()
        np.testing.assert_array_equal(batch["reward"], -np.abs(t + 1 - (g + 1)))
        np.testing.assert_array_equal(batch["terminated"], batch["reward"] > 0)
    assert all(np.array_equal(per_call[key], built_in[key]) for key in per_call)
    lists = her.estimate(eps[2], rng=np.random.default_rng(2))
    assert lists[0][0]["obs"][0] == 2.0  # custom merge put the goal first


def _chi2_upper(df: int) -> float:
    """Wilson-Hilferty approximation of the chi-square 99.9% quantile."""
    z = 3.09
    return df * (1 - 2 / (9 * df) + z * np.sqrt(2 / (9 * df))) ** 3


@pytest.mark.parametrize("strategy", ["future", "episode"])
def test_batched_and_per_episode_paths_agree_in_distribution(strategy):
    """Histogram of (episode, t, g) over many draws: one vectorised call over mixed-length
    episodes against one estimate() call per episode, compared with a two-sample chi-square."""
    her = model(strategy, her_replay_k=1, sample_per_episode=2)
    rng_batched, rng_single = np.random.default_rng(10), np.random.default_rng(11)
    eps = episodes() * 200
    b_e, b_t, _, b_g = decode(her.relabel_batch(eps, rng_batched))
    rows = [tr for ep in eps for tr in her.estimate(ep, rng=rng_single)[0]]
    s = np.array([tr["obs"] for tr in rows])
    s_e, s_t, s_g = s[:, 0].astype(int), s[:, 1].astype(int), s[:, 3].astype(int) - 1
    cells = lambda e, t, g: (e * 12 + t) * 12 + g  # noqa: E731
    a = np.bincount(cells(b_e, b_t, b_g), minlength=3 * 144)
    b = np.bincount(cells(s_e, s_t, s_g), minlength=3 * 144)
    used = (a + b) > 0
    statistic = (((a - b) ** 2)[used] / (a + b)[used]).sum()
    assert statistic < _chi2_upper(int(used.sum()) - 1)
    # and both match the strategy's expected mean goal step on the longest episode
    expected = {"future": (0 + 11) / 2 + np.mean(np.arange(12)) / 2, "episode": 5.5}[strategy]
    for e, g in ((b_e, b_g), (s_e, s_g)):
        assert abs(g[e == 2].mean() - expected) < 0.5


def test_relabel_prob_keeps_a_share_of_original_goals():
    her = HerRewardModel({"her_strategy": "future", "her_replay_k": 4, "relabel_prob": 0.8})
    batch = her.relabel_batch(episodes() * 20, np.random.default_rng(0))
    original = (batch["obs"][:, 2:] == -1).all(axis=1)
    assert 0.15 < original.mean() < 0.25
    assert (batch["reward"][original] == 0).all() and not batch["terminated"][original].any()
    none = HerRewardModel({"her_strategy": "future", "relabel_prob": 0}).relabel_batch(
        episodes(), np.random.default_rng(0)
    )
    assert (none["obs"][:, 2:] == -1).all()


def test_config_object_defaults_and_properties():
    her = HerRewardModel(HerConfig(her_strategy="final", episode_size=8, sample_per_episode=4), cuda=False)
    assert (her.her_strategy, her.her_replay_k, her.episode_size, her.sample_per_episode) == (
        "final",
        1,
        8,
        4,
    )
    default = HerRewardModel({})
    assert (default.her_strategy, default.her_replay_k, default.episode_size, default.sample_per_episode) == (
        "future",
        1,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"her_strategy": "last"}, r"her_strategy 'last' is not one of final, future, episode"),
        ({"her_replay_k": 0}, "her_replay_k must be a positive integer, got 0"),
        ({"sample_per_episode": 2.5}, "sample_per_episode must be a positive integer"),
        ({"relabel_prob": 1.5}, r"relabel_prob must be a number in \[0, 1\], got 1.5"),
    ],
)
def test_bad_config_is_one_clear_error(cfg, message):
    with pytest.raises(ValueError, match=message):
        HerRewardModel(cfg)


def test_bad_episodes_are_one_clear_error():
    her = model("future")
    rng = np.random.default_rng(0)
    ep = make_episode(0, 4)
    empty = {key: value[:0] for key, value in ep.items()}
    cases = [
        ([], "episode is empty"),
        (empty, "episode is empty"),
        (
            {**ep, "obs": ep["obs"][:, :3], "next_obs": ep["next_obs"][:, :3]},
            r"shape \(4, 3\) cannot be split",
        ),
        ({**ep, "reward": ep["reward"][:2]}, r"field 'reward' has shape \(2,\); expected leading size 4"),
        ({key: value for key, value in ep.items() if key != "next_obs"}, "no 'next_obs' field"),
        ({**ep, "obs": ep["obs"][:, 0]}, r"obs has shape \(4,\); expected \[T, obs_dim\]"),
    ]
    for episode, message in cases:
        with pytest.raises(ValueError, match=message) as info:
            her.estimate(episode, rng=rng)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="no episodes"):
        her.relabel_batch([], rng)
    with pytest.raises(ValueError, match="episode 1 is empty"):
        her.relabel_batch([ep, empty], rng)
    with pytest.raises(ValueError, match="episode 1 has fields"):
        her.relabel_batch([ep, {k: v for k, v in ep.items() if k != "action"}], rng)
    with pytest.raises(TypeError, match="dict of arrays or a list of transition dicts"):
        her.estimate(np.zeros((4, 4)), rng=rng)
    batched = HerRewardModel({"her_strategy": "future"}, batched=True)
    with pytest.raises(ValueError, match=r"goal_reward_func returned shape \(\), expected \(4,\)"):
        batched.estimate(ep, goal_reward_func=lambda a, g: np.float32(0), rng=rng)
