"""SequenceBuffer: sequences within episodes, padding, stride, core state, overwrite, priorities,
save/load, input errors, and the learner's data fetcher on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rlpipe.config import Config
from rlpipe.data import DequeBuffer
from rlpipe.data.buffer import Buffer, SequenceBuffer, sequence_index
from rlpipe.data.buffer import sequence as sequence_module
from rlpipe.data.buffer.persist import BufferFileError
from rlpipe.framework import OnlineRLContext, task
from rlpipe.framework.middleware.functional import data_pusher, offpolicy_data_fetcher

S = 3  # core_state width


@pytest.fixture
def layout() -> str:
    """Overrides the buffer tests' two data layouts: SequenceBuffer keeps plain columns of its own."""
    return "columns"


def env_steps(n_envs: int, vector_steps: int, seed: int, mean_len: int = 6) -> Iterator[dict[str, np.ndarray]]:
    """Vector steps of ``n_envs`` envs with episodes of varied length (1 to 2 * mean_len - 1); each
    vector step has a random subset of the envs in random order. Counters name every row: ``t`` (the
    env's step), ``episode`` (the env's episode), ``pos`` (the step in its episode); ``core_state``
    is ``[env, t, episode]``."""
    rng = np.random.default_rng(seed)
    t, episode, pos = (np.zeros(n_envs, dtype=np.int64) for _ in range(3))
    left = rng.integers(1, 2 * mean_len, n_envs)
    for _ in range(vector_steps):
        envs = rng.permutation(n_envs)[: rng.integers(1, n_envs + 1)]
        left[envs] -= 1
        end = left[envs] == 0
        cut = end & (rng.random(len(envs)) < 0.3)
        yield {
            "obs": np.stack([envs, t[envs]], axis=1).astype(np.float32),
            "action": rng.integers(0, 4, len(envs)),
            "reward": rng.random(len(envs)).astype(np.float32),
            "next_obs": np.stack([envs, t[envs] + 1], axis=1).astype(np.float32),
            "terminated": end & ~cut,
            "truncated": cut,
            "env_id": envs.astype(np.int64),
            "t": t[envs].copy(),
            "episode": episode[envs].copy(),
            "pos": pos[envs].copy(),
            "core_state": np.stack([envs, t[envs], episode[envs]], axis=1).astype(np.float32),
        }
        t[envs] += 1
        pos[envs] += 1
        ended = envs[end]
        pos[ended], episode[ended] = 0, episode[ended] + 1
        left[ended] = rng.integers(1, 2 * mean_len, len(ended))


def concat(batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}


def expected_sequences(rows: dict[str, np.ndarray], T: int, stride: int, size: int) -> set[tuple[tuple[int, int], ...]]:
    """The sequences a SequenceBuffer of ``size`` should hold after ``rows``, by a plain loop over
    rows: each a tuple of (env, t) of its steps."""
    open_episodes: dict[int, list[int]] = {}
    found = []
    for r, (env, done) in enumerate(zip(rows["env_id"].tolist(), (rows["terminated"] | rows["truncated"]).tolist(),
                                        strict=True)):
        episode = open_episodes.setdefault(env, [])
        episode.append(r)
        p = len(episode) - 1
        if p >= T - 1 and (p - T + 1) % stride == 0:
            found.append(episode[p - T + 1 :])
        if done:
            found += [episode[s:] for s in range(0, p + 1, stride) if s >= p - T + 2]
            open_episodes[env] = []
    stored_from = len(rows["env_id"]) - size
    return {tuple((int(rows["env_id"][r]), int(rows["t"][r])) for r in seq) for seq in found if seq[0] >= stored_from}


def stored_sequences(buf: SequenceBuffer) -> set[tuple[tuple[int, int], ...]]:
    out = set()
    for i in range(buf.count_runs(buf.sequence_len)):
        data = buf.get(i).data
        n = int(data["mask"].sum())
        out.add(tuple(zip(data["env_id"][:n].tolist(), data["t"][:n].tolist(), strict=True)))
    return out


def filled(size: int = 200, T: int = 5, stride: int = 2, steps: int = 80, seed: int = 0, **kwargs: Any) -> tuple[
        SequenceBuffer, dict[str, np.ndarray]]:
    buf = SequenceBuffer(size, T, stride, seed=seed, **kwargs)
    batches = list(env_steps(4, steps, seed))
    for batch in batches:
        buf.push_batch(batch)
    return buf, concat(batches)


def one_env(n: int, start: int = 0, done_at: tuple[int, ...] = (), env: int = 0) -> dict[str, np.ndarray]:
    """``n`` steps of one env (``t`` from ``start``), episodes ending (terminated) at steps ``done_at``."""
    t = np.arange(start, start + n)
    return {"obs": t[:, None].astype(np.float32) + 1, "action": t + 1, "terminated": np.isin(t, done_at),
            "truncated": np.zeros(n, dtype=bool), "env_id": np.full(n, env), "t": t,
            "core_state": np.repeat(t[:, None], S, axis=1).astype(np.float32)}


# ---- what is stored ------------------------------------------------------------------
@pytest.mark.parametrize(("T", "stride", "size"),
                         [(5, 2, 1000), (4, 4, 1000), (6, 3, 90), (3, 1, 70), (1, 1, 50), (4, 2, 12)])
def test_available_sequences_are_exactly_those_a_plain_loop_finds(T: int, stride: int, size: int) -> None:
    """Several envs interleaved, episodes of varied length, pushes of one to several vector steps, a
    ring that wraps (size < rows pushed; with size 12 a sequence's first step is often overwritten
    before its last one comes): the buffer holds exactly the expected sequences."""
    buf = SequenceBuffer(size, T, stride, seed=0)
    batches = list(env_steps(5, 60, seed=T * 10 + stride))
    rng = np.random.default_rng(1)
    i = 0
    while i < len(batches):
        k = int(rng.integers(1, 5))
        buf.push_batch(concat(batches[i : i + k]))
        i += k
    rows = concat(batches)
    assert buf.count() == min(size, len(rows["t"]))
    assert stored_sequences(buf) == expected_sequences(rows, T, stride, size)


def test_sampled_sequences_never_cross_an_episode_and_start_on_the_stride() -> None:
    buf, _ = filled(size=150, T=5, stride=2, steps=120)
    for _ in range(30):
        data = buf.sample_batch(16, replace=True).data
        mask = data["mask"]
        lengths = mask.sum(axis=1)
        assert (mask == (np.arange(5) < lengths[:, None])).all()  # real steps first, then padding
        for b in range(16):
            n = lengths[b]
            for key in ("env_id", "episode"):
                assert (data[key][b, :n] == data[key][b, 0]).all()
            np.testing.assert_array_equal(np.diff(data["t"][b, :n]), 1)
            np.testing.assert_array_equal(data["pos"][b, :n], data["pos"][b, 0] + np.arange(n))
            assert data["pos"][b, 0] % 2 == 0
            ended = data["terminated"][b, n - 1] | data["truncated"][b, n - 1]
            assert n == 5 or ended  # short only when its episode ended
            assert not (data["terminated"][b, : n - 1] | data["truncated"][b, : n - 1]).any()


def test_short_episode_is_padded_with_zeros_and_masked() -> None:
    buf = SequenceBuffer(50, 5, 2, seed=0)
    buf.push_batch(one_env(3, done_at=(2,)))  # an episode of 3 steps: sequences at 0 (3 steps), 2 (1 step)
    assert buf.count_runs(5) == 2
    first, second = buf.get(0).data, buf.get(1).data
    np.testing.assert_array_equal(first["mask"], [True, True, True, False, False])
    np.testing.assert_array_equal(first["t"], [0, 1, 2, 0, 0])
    np.testing.assert_array_equal(first["obs"][:, 0], [1, 2, 3, 0, 0])
    np.testing.assert_array_equal(first["terminated"], [False, False, True, False, False])
    np.testing.assert_array_equal(second["mask"], [True, False, False, False, False])
    np.testing.assert_array_equal(second["action"], [3, 0, 0, 0, 0])


def test_stride_positions_and_when_sequences_become_available() -> None:
    buf = SequenceBuffer(100, 4, 2, seed=0)
    buf.push_batch(one_env(3))
    assert buf.count_runs(4) == 0  # no sequence has 4 steps yet, and the episode goes on
    buf.push_batch(one_env(6, start=3))  # t 0..8: full sequences at 0, 2, 4
    assert [buf.get(i).data["t"][0] for i in range(buf.count_runs(4))] == [0, 2, 4]
    buf.push_batch(one_env(2, start=9, done_at=(10,)))  # the episode ends at t=10
    starts = {(int(s.data["t"][0]), int(s.data["mask"].sum())) for s in map(buf.get, range(buf.count_runs(4)))}
    assert starts == {(0, 4), (2, 4), (4, 4), (6, 4), (8, 3), (10, 1)}
    buf.push_batch(one_env(4, start=11))  # the next episode starts at 0 again: t=11 is its step 0
    assert buf.get(-1).data["t"][0] == 11
    assert SequenceBuffer(10, 7).stride == 3  # default: half a sequence


def test_core_state_is_the_first_steps() -> None:
    buf, _ = filled(size=300, T=6, stride=3, steps=100)
    batch = buf.sample_batch(32, replace=True)
    core = batch.data["core_state"]
    assert core.shape == (32, 3) and core.dtype == np.float32
    np.testing.assert_array_equal(core[:, 0], batch.data["env_id"][:, 0])
    np.testing.assert_array_equal(core[:, 1], batch.data["t"][:, 0])
    np.testing.assert_array_equal(core[:, 2], batch.data["episode"][:, 0])
    assert "core_state" in buf.sample_batch(1).data and buf.sample_batch(1).data["obs"].shape == (1, 6, 2)


@pytest.mark.parametrize("priority", [False, True])
def test_overwritten_sequences_are_never_sampled_and_their_ids_match_nothing(priority: bool) -> None:
    buf = SequenceBuffer(60, 4, 2, seed=0, priority=priority)
    batches = list(env_steps(3, 40, seed=5))
    buf.push_batch(concat(batches[:15]))
    old = buf.sample_batch(buf.count_runs(4))  # every sequence stored now
    for batch in batches[15:]:
        buf.push_batch(batch)
    rows = concat(batches)
    oldest_t = {env: rows["t"][-60:][rows["env_id"][-60:] == env].min() for env in range(3)}
    for _ in range(20):
        batch = buf.sample_batch(buf.count_runs(4))
        data = batch.data
        assert all(buf.get_by_index(i).index == i for i in batch.indices.tolist())
        for env, t in zip(data["env_id"][:, 0].tolist(), data["t"][:, 0].tolist(), strict=True):
            assert t >= oldest_t[env]
    stored = {buf.get(i).index for i in range(buf.count_runs(4))}
    gone = [i for i in old.indices.tolist() if i not in stored]
    assert gone  # the ring went round: some sequences of the first pushes are gone ...
    for index in gone:  # ... and their ids name nothing
        with pytest.raises(KeyError, match=str(index)):
            buf.get_by_index(index)
    with pytest.raises(ValueError, match="not stored sequences"):
        buf.sample_batch(1, indices=np.array(gone[:1]))


def test_one_big_push_equals_many_small_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sequence_module, "PUSH_CHUNK", 7)  # a big push goes in several chunks
    rows = concat(list(env_steps(4, 50, seed=3)))
    big, small = SequenceBuffer(500, 5, 2), SequenceBuffer(500, 5, 2)
    big.push_batch(rows)
    for i in range(len(rows["t"])):
        small.push_batch({key: value[i : i + 1] for key, value in rows.items()})
    assert stored_sequences(big) == stored_sequences(small) == expected_sequences(rows, 5, 2, 500)


def test_a_push_larger_than_the_ring_keeps_its_last_rows() -> None:
    rows = concat(list(env_steps(4, 50, seed=3)))
    tiny = SequenceBuffer(40, 5, 2)
    tiny.push_batch(rows)
    assert tiny.count() == 40
    assert stored_sequences(tiny) == expected_sequences(rows, 5, 2, 40)


def test_push_one_step_delete_clear_and_item_api() -> None:
    buf = SequenceBuffer(20, 2, 1, seed=0)
    for t in range(3):
        item = buf.push({"obs": np.float32(t), "terminated": t == 2, "truncated": False, "env_id": 7})
        assert item.index == t  # the row id
    assert buf.count() == 3 and len(buf) == 3 and buf.count_runs(2) == 3  # (0, 1), (1, 2), (2,)
    items = buf.sample(3)
    assert sorted(item.data["obs"][0] for item in items) == [0, 1, 2]
    assert all(item.data["obs"].shape == (2,) for item in items)
    buf.delete(items[0].index)
    assert buf.count_runs(2) == 2 and buf.count() == 3  # the steps stay
    buf.clear()
    assert buf.count() == 0 and buf.count_runs(2) == 0
    buf.push({"obs": np.float32(5), "terminated": False, "truncated": False, "env_id": 7})
    buf.push({"obs": np.float32(6), "terminated": False, "truncated": False, "env_id": 7})
    assert buf.count_runs(2) == 1 and list(buf.get(0).data["obs"]) == [5, 6]  # open episodes were forgotten
    with pytest.raises(IndexError):
        buf.get(1)
    with pytest.raises(NotImplementedError, match="no views"):
        buf.view()
    with pytest.raises(NotImplementedError, match="priority=True"):
        buf.use(lambda *args: None)
    with pytest.raises(NotImplementedError, match="read-only"):
        buf.update(0, data={"obs": 1})


# ---- priorities ----------------------------------------------------------------------
def four_sequences(**kwargs: Any) -> tuple[SequenceBuffer, np.ndarray]:
    buf = SequenceBuffer(40, 4, 4, priority=True, seed=0, **kwargs)
    buf.push_batch(one_env(16))
    ids = np.array([buf.get(i).index for i in range(4)])
    return buf, ids


def test_sampling_frequency_follows_priority_to_the_alpha() -> None:
    """Chi-square goodness of fit of 24,000 draws against p^alpha / sum p^alpha (fixed seed)."""
    buf, ids = four_sequences(priority_alpha=0.7)
    priority = np.array([0.5, 1.0, 3.0, 8.0])
    buf.update_priority(ids, priority)
    counts = dict.fromkeys(ids.tolist(), 0)
    for _ in range(1000):
        for index in buf.sample_batch(24, replace=True).indices.tolist():
            counts[index] += 1
    observed = np.array([counts[i] for i in ids.tolist()], dtype=float)
    p = (priority + 1e-6) ** 0.7
    expected = p / p.sum() * observed.sum()
    assert (((observed - expected) ** 2) / expected).sum() < 16.3  # 99.9% quantile, 3 dof


def test_is_weights_new_sequences_and_ignored_updates() -> None:
    buf, ids = four_sequences(priority_alpha=0.5, priority_beta=0.4)
    assert buf.has_priority_replay and isinstance(buf, Buffer)
    priority = np.array([1.0, 4.0, 9.0, 16.0])
    buf.update_priority(torch.tensor(ids), torch.tensor(priority))
    batch = buf.sample_batch(8, replace=True)
    p_alpha = (priority + 1e-6) ** 0.5
    prob = p_alpha / p_alpha.sum()
    drawn = prob[np.searchsorted(ids, batch.indices)]
    expected = (4 * drawn) ** -0.4 / (4 * prob.min()) ** -0.4  # PER's weight over the largest possible one
    np.testing.assert_allclose(batch.data["weight"], expected, rtol=1e-5)
    assert batch.data["weight"].dtype == np.float32 and batch.data["weight"].max() <= 1
    assert buf.get_by_index(int(ids[2])).meta["priority"] == pytest.approx(9.0)

    buf.push_batch(one_env(4, start=16))  # a new sequence gets the largest priority seen
    assert buf.get(-1).meta["priority"] == pytest.approx(16.0)
    buf.push_batch(one_env(40, start=20))  # the ring goes round: the first sequences are gone
    buf.update_priority(ids, np.full(4, 1000.0))  # ... so this changes nothing
    assert all(buf.get(i).meta["priority"] == pytest.approx(16.0) for i in range(buf.count_runs(4)))
    buf.push_batch(one_env(4, start=60))
    assert buf.get(-1).meta["priority"] == pytest.approx(16.0)  # 1000 was never seen
    with pytest.raises(ValueError, match="finite"):
        buf.update_priority(ids[:1], [float("nan")])
    assert buf.update(int(buf.get(0).index), meta={"priority": 2.0})
    assert buf.get(0).meta["priority"] == pytest.approx(2.0)


def test_a_new_sequence_enters_at_the_eta_mix_of_its_steps_initial_td() -> None:
    buf = SequenceBuffer(40, 4, 2, priority=True, seed=0, priority_eta=0.75)
    rows = one_env(11, done_at=(9,))  # sequences at steps 0, 2, 4, 6, 8 (the last two cut at step 9), then one at 10
    td = np.random.default_rng(0).uniform(0, 3, 11).astype(np.float32)
    buf.push_batch({**rows, "initial_td": td})
    for i, (start, end) in enumerate([(0, 4), (2, 6), (4, 8), (6, 10), (8, 10)]):
        item = buf.get(i)
        assert item.data["t"][0] == start
        steps = td[start:end]
        assert item.meta["priority"] == pytest.approx(0.75 * steps.max() + 0.25 * steps.mean(), rel=1e-6)
    assert buf.count_runs(4) == 5  # the sequence from step 10 is still open
    plain = SequenceBuffer(40, 4, 2, priority=True, seed=0)
    plain.push_batch(rows)
    assert all(plain.get(i).meta["priority"] == pytest.approx(1.0) for i in range(5))  # the largest seen


def test_uniform_buffer_ignores_priorities_and_draws_uniformly() -> None:
    buf = SequenceBuffer(40, 4, 4, seed=0)
    buf.push_batch(one_env(16))
    assert not buf.has_priority_replay
    buf.update_priority(np.arange(4), np.array([0.0, 0.0, 0.0, 100.0]))
    counts = np.bincount(np.concatenate([buf.sample_batch(2).indices for _ in range(2000)]), minlength=4)
    assert "weight" not in buf.sample_batch(1).data
    np.testing.assert_allclose(counts / counts.sum(), 0.25, atol=0.02)


# ---- save / load ---------------------------------------------------------------------
@pytest.mark.parametrize("priority", [False, True])
def test_save_load_round_trip_samples_exactly_as_the_original(tmp_path: Path, priority: bool) -> None:
    batches = list(env_steps(4, 90, seed=8))
    buf = SequenceBuffer(120, 5, 2, seed=1, priority=priority)
    for batch in batches[:60]:  # the ring wraps; envs are mid-episode at the save
        buf.push_batch(batch)
    first = buf.sample_batch(6)
    buf.update_priority(first.indices, np.arange(6) + 0.5)
    path = tmp_path / ".final.buffer.npz.pending"  # the checkpoint saver's name: not ending in .npz
    buf.save_data(str(path))
    loaded = SequenceBuffer(120, 5, 2, seed=99, priority=priority)
    loaded.push_batch(batches[0])
    loaded.load_data(str(path))
    assert loaded.count() == buf.count() and loaded.count_runs(5) == buf.count_runs(5)
    for batch in batches[60:]:  # open episodes go on, sequences complete, the ring overwrites, draws go on
        buf.push_batch(batch)
        loaded.push_batch(batch)
        a, b = buf.sample_batch(4), loaded.sample_batch(4)
        np.testing.assert_array_equal(a.indices, b.indices)
        assert a.data.keys() == b.data.keys()
        for key in a.data:
            np.testing.assert_array_equal(a.data[key], b.data[key])
        buf.update_priority(a.indices, np.arange(4.0))
        loaded.update_priority(b.indices, np.arange(4.0))
    assert stored_sequences(loaded) == expected_sequences(concat(batches), 5, 2, 120)
    with np.load(path, allow_pickle=False) as npz:  # loads without pickle
        assert "__header__" in npz.files


def test_columns_pushed_as_tensors_come_back_as_tensors_also_after_load(tmp_path: Path) -> None:
    buf = SequenceBuffer(50, 4, 2, seed=0, priority=True)
    batch = one_env(10, done_at=(9,))
    buf.push_batch({**batch, "obs": torch.from_numpy(batch["obs"])})
    sample = buf.sample_batch(3)
    assert all(isinstance(value, torch.Tensor) for value in sample.data.values())
    assert sample.data["obs"].dtype == torch.float32 and sample.data["mask"].dtype == torch.bool
    buf.save_data(str(tmp_path / "b.npz"))
    loaded = SequenceBuffer(50, 4, 2, priority=True)
    loaded.load_data(str(tmp_path / "b.npz"))
    assert isinstance(loaded.sample_batch(1).data["weight"], torch.Tensor)


def test_bad_files_are_one_line_errors_naming_the_file(tmp_path: Path) -> None:
    buf, _ = filled(size=100, steps=30)
    good = tmp_path / "good.npz"
    buf.save_data(str(good))
    damaged = tmp_path / "damaged.npz"
    damaged.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    deque = tmp_path / "deque.npz"
    DequeBuffer(10).save_data(str(deque))
    other = SequenceBuffer(100, 5, 2, seed=0)
    other.push_batch(one_env(12))
    before = stored_sequences(other)
    for path, message in [(damaged, "damaged"), (deque, "format"), (tmp_path / "missing.npz", "damaged")]:
        with pytest.raises(BufferFileError, match=path.name) as err:
            other.load_data(str(path))
        assert "\n" not in str(err.value) and message in str(err.value)
    with pytest.raises(BufferFileError, match=r"good\.npz"):
        SequenceBuffer(100, 6, 2).load_data(str(good))  # other settings
    with pytest.raises(BufferFileError, match="sequence_buffer"):
        DequeBuffer(100).load_data(str(good))
    assert stored_sequences(other) == before  # a failed load changed nothing


# ---- errors --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "column"),
    [
        (lambda b: b.pop("env_id"), "env_id"),
        (lambda b: b.pop("terminated"), "terminated"),
        (lambda b: b.pop("truncated"), "truncated"),
        (lambda b: b.update(reward=b["reward"][:-1]), "reward"),
        (lambda b: b.update(core_state=b["core_state"][:, 0]), "core_state"),
        (lambda b: b.update(core_state=b["core_state"][:, :2]), "core_state"),  # S changed
        (lambda b: b.update(terminated=b["terminated"].astype(np.float32)), "terminated"),
        (lambda b: b.update(env_id=b["env_id"].astype(np.float32)), "env_id"),
        (lambda b: b.update(note=np.array(["x"] * len(b["t"]))), "note"),
        (lambda b: b.update(extra=np.zeros(len(b["t"]))), "extra"),
        (lambda b: b.pop("reward"), "reward"),
        (lambda b: b.update(obs=b["obs"][:, :1]), "obs"),
        (lambda b: b.update(mask=np.ones(len(b["t"]), dtype=bool)), "mask"),
        (lambda b: b.update(initial_td=np.full(len(b["t"]), -1.0)), "initial_td"),
        (lambda b: b.update(initial_td=np.full(len(b["t"]), np.nan)), "initial_td"),
    ],
)
def test_bad_push_is_a_one_line_error_naming_the_column_and_stores_nothing(change: Any, column: str) -> None:
    buf = SequenceBuffer(100, 4, 2, seed=0)
    steps = env_steps(3, 10, seed=0)
    buf.push_batch(next(steps))
    count, runs = buf.count(), buf.count_runs(4)
    batch = next(steps)
    change(batch)
    with pytest.raises(ValueError, match=f"'{column}'") as err:
        buf.push_batch(batch)
    assert "\n" not in str(err.value)
    assert (buf.count(), buf.count_runs(4)) == (count, runs)
    buf.push_batch(next(steps))  # the buffer still works


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"size": 0, "sequence_len": 1}, "size"), ({"size": 10, "sequence_len": 0}, "sequence_len"),
     ({"size": 10, "sequence_len": 11}, "sequence_len"), ({"size": 10, "sequence_len": 4, "stride": 0}, "stride"),
     ({"size": 10, "sequence_len": 4, "stride": 5}, "stride"), ({"size": 10, "sequence_len": 4.0}, "sequence_len"),
     ({"size": 10, "sequence_len": 4, "priority_alpha": -1}, "priority_alpha"),
     ({"size": 10, "sequence_len": 4, "priority_beta": 1.5}, "priority_beta"),
     ({"size": 10, "sequence_len": 4, "priority_eta": 1.5}, "priority_eta")],
)
def test_bad_arguments_are_errors_naming_them(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        SequenceBuffer(**kwargs)


def test_unroll_len_must_be_the_sequence_len() -> None:
    buf, _ = filled()
    with pytest.raises(ValueError, match=r"unroll_len 4 .* sequence_len 5"):
        buf.sample_batch(2, unroll_len=4)
    with pytest.raises(ValueError, match="unroll_len 6"):
        buf.count_runs(6)
    assert buf.sample_batch(2, groupby="env", unroll_len=5).data["obs"].shape == (2, 5, 2)
    with pytest.raises(ValueError, match="only"):
        buf.sample_batch(buf.count_runs(5) + 1)


# ---- in the pipeline -----------------------------------------------------------------
def test_data_pusher_and_fetcher_work_with_it_unchanged() -> None:
    cfg = Config()
    cfg.policy.learn.batch_size = 4
    cfg.policy.collect.unroll_len = 5
    cfg.policy.priority = True
    buf = SequenceBuffer(500, 5, 2, seed=0, priority=True)
    push = data_pusher(cfg, buf)  # adds meta (the env, the train iteration): accepted, not stored
    for batch in env_steps(4, 40, seed=2):
        push(OnlineRLContext(trajectories=batch))
    ctx = OnlineRLContext()
    backward = task.wrap(offpolicy_data_fetcher(cfg, buf))(ctx)
    data = ctx.train_data
    assert data["obs"].shape == (4, 5, 2) and data["mask"].shape == (4, 5) and data["weight"].shape == (4,)
    ctx.train_output = {"priority": torch.tensor([5.0, 6.0, 7.0, 8.0])}
    backward()
    # a sequence is named by its env and first step: the fetched ones got the learner's priorities
    priority = {(int(item.data["env_id"][0]), int(item.data["t"][0])): item.meta["priority"]
                for item in map(buf.get, range(buf.count_runs(5)))}
    fetched = list(zip(data["env_id"][:, 0].tolist(), data["t"][:, 0].tolist(), strict=True))
    expected = dict.fromkeys(priority, 1.0) | dict(zip(fetched, [5.0, 6.0, 7.0, 8.0], strict=True))
    assert priority == pytest.approx(expected)


def test_a_cramped_index_drops_sequences_early_but_never_serves_wrong_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index's spare room (SLACK) made negative: a table of 20 slots and 30 entries for a ring of 30
    steps, too small for what the ring holds. Sequences then leave the index early (a subset of the
    expected remains), and every sequence still served has its own steps."""
    monkeypatch.setattr(sequence_index, "SLACK", -10)
    buf = SequenceBuffer(30, 6, 2, seed=0)
    batches = list(env_steps(8, 150, seed=4, mean_len=4))
    dropped_early = 0
    for i, batch in enumerate(batches):
        buf.push_batch(batch)
        stored, expected = stored_sequences(buf), expected_sequences(concat(batches[: i + 1]), 6, 2, 30)
        assert stored <= expected
        dropped_early += stored != expected
        if buf.count_runs(6):
            data = buf.sample_batch(buf.count_runs(6)).data
            mask = data["mask"]
            np.testing.assert_array_equal(data["obs"][..., 0][mask], data["env_id"][mask])
            np.testing.assert_array_equal(data["obs"][..., 1][mask], data["t"][mask])
    assert dropped_early > 10
