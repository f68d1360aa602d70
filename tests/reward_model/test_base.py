import numpy as np
import pytest

from rlpipe.reward_model import BaseRewardModel


class ConstantBonus(BaseRewardModel):
    """A fixed reward model: adds 1 to every reward of the batch it is given."""

    def estimate(self, train_data):
        return {**train_data, "reward": train_data["reward"] + 1.0}


def test_base_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        BaseRewardModel()


def test_fixed_model_estimates_and_train_is_optional():
    model = ConstantBonus()
    batch = {"reward": np.zeros(3, dtype=np.float32)}
    assert model.train(batch) is None
    np.testing.assert_array_equal(model.estimate(batch)["reward"], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(batch["reward"], [0.0, 0.0, 0.0])
