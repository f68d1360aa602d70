"""PriorityExperienceReplay: sampling frequencies, IS weights and anneal, updates, delete, state."""

from __future__ import annotations

import numpy as np
import pytest

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
    with pytest.raises(ValueError, match=">= 0"):
        buf.update_batch(ids, {"priority": np.array([-1.0, np.nan])})


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
