"""PriorityExperienceReplay: sampling frequencies, IS weights and anneal, updates, delete, state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlpipe.data import DequeBuffer, PriorityExperienceReplay, use_time_check


def make(size=8, alpha=0.6, beta=0.4, anneal=100, seed=0, IS_weight=True):
    buf = DequeBuffer(size, seed=seed)
    per = PriorityExperienceReplay(
        buf,
        IS_weight=IS_weight,
        priority_power_factor=alpha,
        IS_weight_power_factor=beta,
        IS_weight_anneal_train_iter=anneal,
    )
    buf.use(per)
    return buf, per


def rows(n, start=0):
    return {"action": np.arange(start, start + n), "reward": np.zeros(n, dtype=np.float32)}


def test_frequencies_follow_priority_to_the_alpha() -> None:
    """Chi-square goodness of fit of 40,000 draws against p^alpha / sum p^alpha (fixed seed)."""
    buf, _ = make(size=6, alpha=0.7)
    ids = buf.push_batch(rows(6))
    priority = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 0.0])
    buf.update_batch(ids, {"priority": priority})
    counts = np.zeros(6)
    for _ in range(250):
        np.add.at(counts, buf.sample_batch(160, replace=True).indices, 1)
    expected_p = (priority + 1e-6) ** 0.7
    expected = expected_p / expected_p.sum() * counts.sum()
    assert counts[5] == 0  # zero priority is (almost) never drawn
    chi2 = (((counts - expected) ** 2) / expected)[:5].sum()
    assert chi2 < 20.5  # 99.9% quantile of chi-square with 4 dof is 18.5


def test_is_weights_match_formula_and_anneal_to_one() -> None:
    buf, per = make(size=4, alpha=0.5, beta=0.4, anneal=10)
    ids = buf.push_batch(rows(4))
    priority = np.array([1.0, 4.0, 9.0, 16.0])
    buf.update_batch(ids, {"priority": priority})
    p_alpha = (priority + 1e-6) ** 0.5
    for call in range(15):
        beta = min(1.0, 0.4 + 0.6 * call / 10)
        assert per.beta == pytest.approx(beta)
        batch = buf.sample_batch(4, replace=True)
        prob = p_alpha / p_alpha.sum()
        w = (4 * prob[batch.indices]) ** -beta / (4 * prob.min()) ** -beta
        np.testing.assert_allclose(batch.data["weight"], w, rtol=1e-5)
        assert batch.data["weight"].dtype == np.float32
    assert per.beta == 1.0
    items = buf.sample(3, replace=True)
    for item in items:
        assert item.meta["priority_IS"] == pytest.approx(p_alpha.min() / p_alpha[item.index])


def test_new_items_get_max_priority_and_push_meta_priority() -> None:
    buf, per = make(alpha=1.0)
    ids = buf.push_batch(rows(2))
    buf.update_batch(ids, {"priority": np.array([3.0, 0.5])})
    item = buf.push({"action": 9, "reward": 0.0})
    assert item.meta["priority"] == 3.0
    assert per.tree.leaves(np.array([2]))[0] == pytest.approx(3.0, rel=1e-5)
    buf.push({"action": 10, "reward": 0.0}, {"priority": 7.0})
    assert per.max_priority == 7.0
    assert buf.get(-1).meta["priority"] == 7.0
    assert buf.update(0, meta={"priority": 2.0})
    assert per.tree.leaves(np.array([0]))[0] == pytest.approx(2.0, rel=1e-5)
    with pytest.raises(ValueError, match=r">= 0, got -1\.0"):
        buf.update_batch(ids, {"priority": np.array([-1.0, np.nan])})
    for bad in (np.inf, np.nan):  # a diverging critic's |TD error| must not take every draw silently
        with pytest.raises(ValueError, match=f"finite and >= 0, got {bad}"):
            buf.update_priority(ids, np.array([bad, 1.0]))
    assert per.max_priority == 7.0


def test_delete_overwrite_and_clear_keep_tree_consistent() -> None:
    buf, per = make(size=4, alpha=1.0)
    ids = buf.push_batch(rows(4))
    buf.update_batch(ids, {"priority": np.array([1.0, 2.0, 3.0, 4.0])})
    buf.delete([1, 3])
    assert per.tree.total == pytest.approx(4.0, rel=1e-5)
    for _ in range(20):
        assert set(buf.sample_batch(2).indices.tolist()) <= {0, 2}
    with pytest.raises(ValueError, match="cannot sample 3 items without replacement: only 2 available"):
        buf.sample_batch(3)
    buf.push_batch(rows(1, 4))  # id 4 overwrites the slot of id 0, at max priority 4
    assert per.tree.leaves(np.array([0]))[0] == pytest.approx(4.0, rel=1e-5)
    ok = buf.update_batch(np.array([0, 4]), {"priority": np.array([100.0, 1.0])})
    np.testing.assert_array_equal(ok, [False, True])
    assert per.tree.total == pytest.approx(1.0 + 3.0, rel=1e-5)
    buf.clear()
    assert per.tree.total == 0 and per.max_priority == 1.0


def test_use_time_check_deletes_through_the_priority_chain() -> None:
    buf, per = make(size=4, alpha=1.0)
    buf.use(use_time_check(buf, max_use=1))
    buf.push_batch(rows(4))
    first = buf.sample_batch(2).indices
    assert buf.count() == 2
    assert per.tree.leaves(first % 4).sum() == 0
    assert set(buf.sample_batch(2).indices.tolist()).isdisjoint(first.tolist())


def test_pass_through_for_indices_groupby_and_no_weights_when_disabled() -> None:
    buf, per = make(IS_weight=False)
    buf.push_batch(rows(4), {"env": np.array([0, 1, 0, 1])})
    assert "weight" not in buf.sample_batch(2).data
    assert [item.index for item in buf.sample(indices=[2, 0])] == [2, 0]
    assert len(buf.sample(2, groupby="env")) == 2
    calls = per.sample_calls
    buf.sample_batch(1, unroll_len=2, groupby="env")
    assert per.sample_calls == calls
    with pytest.raises(ValueError, match="priority_power_factor"):
        PriorityExperienceReplay(buf, priority_power_factor=-1)


def test_update_priority_sets_the_leaves_and_the_sampling_frequencies() -> None:
    buf, per = make(size=4, alpha=1.0)
    ids = buf.push_batch(rows(4))
    buf.update_priority(ids, np.array([0.0, 0.0, 1.0, 3.0]))
    np.testing.assert_allclose(per.tree.leaves(), [1e-6, 1e-6, 1.0 + 1e-6, 3.0 + 1e-6])
    counts = np.bincount(buf.sample_batch(4000, replace=True).indices, minlength=4)
    assert counts[:2].sum() <= 2 and 800 < counts[2] < 1200  # 1/4 of the draws, 3/4 for the last
    buf.update_priority(np.array([0, 99]), torch.tensor([2.0, 5.0]))  # a learner's tensor; 99 is not stored
    np.testing.assert_allclose(per.tree.leaves(), [2.0 + 1e-6, 1e-6, 1.0 + 1e-6, 3.0 + 1e-6])
    assert per.max_priority == 3.0


def test_update_priority_takes_one_priority_per_sequence_and_names_shapes() -> None:
    buf, per = make(size=6, alpha=1.0)
    ids = buf.push_batch(rows(6)).reshape(3, 2)  # a [B, T] batch of indices
    buf.update_priority(ids, np.array([1.0, 2.0, 4.0]))  # one per sequence: repeated over T
    np.testing.assert_allclose(per.tree.leaves(), np.repeat([1.0, 2.0, 4.0], 2) + 1e-6)
    buf.update_priority(ids, np.arange(6.0).reshape(3, 2))
    np.testing.assert_allclose(per.tree.leaves(), np.arange(6.0) + 1e-6)
    with pytest.raises(ValueError, match=r"priority has shape \(2,\), indices have shape \(3, 2\)"):
        buf.update_priority(ids, np.ones(2))
    with pytest.raises(ValueError, match="indices must be integers"):
        buf.update_priority(np.array(["a"]), np.ones(1))


def test_priority_lives_in_the_tree_and_items_show_the_latest() -> None:
    buf, per = make(size=4, alpha=0.6)
    buf.push({"action": 0, "reward": 0.0}, {"priority": 2.0, "env": 0})
    ids = buf.push_batch(rows(3, 1), {"priority": np.array([1.0, 2.0, 3.0]), "env": np.arange(1, 4)})
    buf.update_batch(ids, {"priority": np.array([4.0, 5.0, 6.0]), "env": np.array([7, 8, 9])})
    assert buf.update(0, meta={"priority": 0.25})
    buf.update_priority(np.array([3]), np.array([0.5]))
    assert "priority" not in buf.storage.meta.columns  # stored once: in the tree
    expected = {0: 0.25, 1: 4.0, 2: 5.0, 3: 0.5}
    for i, priority in expected.items():
        item = buf.get_by_index(i)
        assert item.meta["priority"] == pytest.approx(priority, rel=1e-9)
        assert buf.get(i).meta["priority"] == item.meta["priority"]
    assert buf.get_by_index(2).meta["env"] == 8  # the rest of the meta was written
    for item in buf.sample(4) + buf.sample(indices=[3]) + buf.sample(1, groupby="env")[0]:
        assert item.meta["priority"] == pytest.approx(expected[item.index], rel=1e-9)
    assert not buf.update(99, meta={"priority": 9.0}) and not buf.update("x", meta={"priority": 9.0})
    assert per.max_priority == 6.0  # the unknown ones set nothing
    np.testing.assert_array_equal(buf.update_batch(np.array([1, 42]), {"priority": np.ones(2)}), [True, False])


def test_float32_priorities_read_back_exactly() -> None:
    buf, _ = make(size=4, alpha=1.0)
    ids = buf.push_batch(rows(3))
    priority = np.array([0.1, 2.5, 7.3], dtype=np.float32)
    buf.update_priority(ids, priority)
    assert [buf.get(i).meta["priority"] for i in range(3)] == priority.tolist()
    assert buf.push({"action": 3, "reward": 0.0}).meta["priority"] == buf.get(3).meta["priority"] == float(priority[2])


def test_priority_reads_back_exactly_with_alpha_zero() -> None:
    buf, per = make(size=4, alpha=0.0)
    ids = buf.push_batch(rows(2))
    buf.update_priority(ids, np.array([0.3, 7.0]))
    assert [buf.get(i).meta["priority"] for i in range(2)] == [0.3, 7.0]
    assert per.state_dict()["raw_priority"][:2].tolist() == [0.3, 7.0]


def test_has_priority_replay() -> None:
    buf, _ = make()
    assert buf.has_priority_replay and not buf.view().has_priority_replay
    assert not DequeBuffer(4).use(use_time_check(DequeBuffer(4))).has_priority_replay


def test_weights_are_tensors_in_a_buffer_of_tensor_fields() -> None:
    buf, _ = make(size=4)
    buf.push_batch({"obs": torch.zeros(4, 2), "action": torch.arange(4)})
    batch = buf.sample_batch(2)
    assert isinstance(batch.data["weight"], torch.Tensor) and batch.data["weight"].dtype == torch.float32
    assert isinstance(batch.data["obs"], torch.Tensor) and batch.data["obs"].shape == (2, 2)
    numpy_buf, _ = make(size=4)
    numpy_buf.push_batch(rows(4))
    assert isinstance(numpy_buf.sample_batch(2).data["weight"], np.ndarray)
