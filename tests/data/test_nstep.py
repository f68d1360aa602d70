"""N-step transitions vs returns computed by hand, two interleaved envs, held windows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlpipe.data import NStepAccumulator

GAMMA = 0.5


def rows(env_id, t, reward, terminated, truncated):
    """One-step rows; obs = 10*env + t, next_obs = obs + 1."""
    env_id, t = np.asarray(env_id), np.asarray(t)
    obs = (10 * env_id + t).astype(np.float32)
    return {
        "obs": obs[:, None],
        "next_obs": obs[:, None] + 1,
        "action": t.astype(np.int64),
        "reward": np.asarray(reward, dtype=np.float32),
        "terminated": np.asarray(terminated, dtype=bool),
        "truncated": np.asarray(truncated, dtype=bool),
        "env_id": env_id.astype(np.int64),
    }


def test_two_interleaved_envs_terminated_and_truncated_by_hand() -> None:
    """n=3. Env 0: rewards 1,2,4,8 then terminated at t=3. Env 1: rewards 1,1,1 truncated at t=2.

    Rows arrive interleaved (env0 t, env1 t) in two calls.
    """
    acc = NStepAccumulator(3, GAMMA)
    first = acc.add(rows([0, 1, 0, 1], [0, 0, 1, 1], [1, 1, 2, 1], [0, 0, 0, 0], [0, 0, 0, 0]))
    assert first["reward"].shape == (0,)  # no window complete yet
    assert acc.pending_count == 4
    second = acc.add(
        rows([0, 1, 0, 1, 0], [2, 2, 3, 3, 4], [4, 1, 8, 5, 0], [0, 0, 1, 0, 0], [0, 1, 0, 0, 0])
    )
    # env1 t=3 starts a new episode (after truncation), env0 t=4 a new one (after termination).
    got = {
        (int(e), int(a)): i for i, (e, a) in enumerate(zip(second["env_id"], second["action"], strict=True))
    }
    expected = {
        # (env, t): (reward, next_obs, terminated, truncated, value_gamma)
        (0, 0): (1 + 0.5 * 2 + 0.25 * 4, 3, False, False, 0.125),
        (0, 1): (2 + 0.5 * 4 + 0.25 * 8, 4, True, False, 0.125),
        (0, 2): (4 + 0.5 * 8, 4, True, False, 0.25),
        (0, 3): (8, 4, True, False, 0.5),
        (1, 0): (1 + 0.5 + 0.25, 3, False, True, 0.125),
        (1, 1): (1 + 0.5, 3, False, True, 0.25),
        (1, 2): (1, 3, False, True, 0.5),
    }
    assert set(got) == set(expected)
    for key, (ret, next_obs, term, trunc, vg) in expected.items():
        i = got[key]
        assert second["reward"][i] == pytest.approx(ret)
        assert second["next_obs"][i, 0] == 10 * key[0] + next_obs
        assert second["obs"][i, 0] == 10 * key[0] + key[1]
        assert bool(second["terminated"][i]) is term and bool(second["truncated"][i]) is trunc
        assert second["value_gamma"][i] == pytest.approx(vg)
    assert second["value_gamma"].dtype == np.float32
    # output is time-ordered (by arrival)
    arrival = [(k[1], k[0]) for k in sorted(got, key=got.get)]
    assert arrival == sorted(arrival)
    assert acc.pending_count == 2  # env1 t=3 and env0 t=4, episodes still running


def test_nstep_one_is_identity_plus_value_gamma() -> None:
    acc = NStepAccumulator(1, 0.9)
    batch = rows([0, 1], [0, 0], [3, 4], [0, 1], [0, 0])
    out = acc.add(batch)
    for key, value in batch.items():
        np.testing.assert_array_equal(out[key], value)
    np.testing.assert_allclose(out["value_gamma"], [0.9, 0.9])


def test_missing_fields_and_changed_fields_are_rejected() -> None:
    acc = NStepAccumulator(2, GAMMA)
    batch = rows([0], [0], [1], [0], [0])
    with pytest.raises(ValueError, match="missing \\['env_id'\\]"):
        acc.add({k: v for k, v in batch.items() if k != "env_id"})
    acc.add(batch)
    with pytest.raises(ValueError, match="changed fields"):
        acc.add({**batch, "extra": np.zeros(1)})
    with pytest.raises(ValueError, match="nstep must be >= 1"):
        NStepAccumulator(0, GAMMA)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 4),
    lengths=st.lists(st.integers(1, 7), min_size=1, max_size=6),
    truncate=st.lists(st.booleans(), min_size=6, max_size=6),
    chunk=st.integers(1, 9),
)
def test_matches_reference_for_random_episodes(
    n: int, lengths: list[int], truncate: list[bool], chunk: int
) -> None:
    """Two envs playing the same episode lists, stepped together, fed in chunks of `chunk` rows."""
    rng = np.random.default_rng(len(lengths) * 31 + n)
    per_env = []
    for env in (0, 1):
        steps = []
        for e, length in enumerate(lengths if env == 0 else lengths[::-1]):
            for t in range(length):
                end = t == length - 1
                steps.append(
                    (env, len(steps), float(rng.integers(0, 5)), end and not truncate[e], end and truncate[e])
                )
        per_env.append(steps)
    stream = [s for pair in zip(*per_env, strict=True) for s in pair]
    acc = NStepAccumulator(n, GAMMA)
    outs = []
    for i in range(0, len(stream), chunk):
        part = list(zip(*stream[i : i + chunk], strict=True))
        outs.append(acc.add(rows(*part)))
    out = {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}
    finished = {(s[0], s[1]) for steps in per_env for s in steps}
    # reference: every step whose episode ended (all do, last step is an end) is emitted once
    for env, steps in enumerate(per_env):
        for t, (_, _, _, _, _) in enumerate(steps):
            ret, k = 0.0, 0
            while k < n and t + k < len(steps):
                ret += GAMMA**k * steps[t + k][2]
                k += 1
                if steps[t + k - 1][3] or steps[t + k - 1][4]:
                    break
            mask = (out["env_id"] == env) & (out["action"] == t)
            assert mask.sum() == 1
            assert out["reward"][mask][0] == pytest.approx(ret)
            assert out["value_gamma"][mask][0] == pytest.approx(GAMMA**k)
            assert out["next_obs"][mask][0, 0] == 10 * env + t + k
            assert bool(out["terminated"][mask][0]) == steps[t + k - 1][3]
    assert len(out["reward"]) == len(finished)
    assert acc.pending_count == 0
