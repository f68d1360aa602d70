"""The distributional rows of the algorithm table: their keys, and noisy networks replacing
epsilon-greedy exploration (in the config check, the collect half and the error lines)."""
import pytest

from rlpipe.config import ConfigError, load_config
from rlpipe.config.algorithms import ALGORITHMS, Exploration

from ..entry.test_algorithm_table import SMALL, collect_kwargs_seen


@pytest.mark.parametrize("preset", ["cartpole-c51", "cartpole-qrdqn"])
def test_noisy_networks_replace_the_epsilon_schedule(preset):
    assert collect_kwargs_seen(load_config(preset, SMALL)) == {"eps": 1.0}
    assert collect_kwargs_seen(load_config(preset, [*SMALL, "policy.model.noisy=true"])) == {}


def test_the_row_derives_exploration_from_the_config():
    c51 = ALGORITHMS["c51"]
    assert c51.exploration_of(load_config("cartpole-c51").policy) is Exploration.EPSILON
    assert c51.exploration_of(load_config("cartpole-c51", ["policy.model.noisy=true"]).policy) is Exploration.NOISY_NETS
    assert "other.eps.decay" not in c51.keys_for(Exploration.NOISY_NETS)


def test_epsilon_keys_with_noisy_networks_are_a_one_line_error():
    with pytest.raises(ConfigError) as err:
        load_config("cartpole-c51", ["policy.model.noisy=true", "policy.other.eps.decay=5000"])
    assert str(err.value).splitlines() == [
        "config key 'policy.other.eps.decay' is not read by policy.type 'c51', which explores with noisy networks "
        "(policy.model.noisy=true): remove it"]


@pytest.mark.parametrize(("preset", "override", "message"), [
    ("cartpole-dqn", "policy.model.num_atoms=11", "config key 'policy.model.num_atoms' is not read by policy.type "
                                                  "'dqn': remove it (it is read by c51)"),
    ("cartpole-dqn", "policy.model.noisy=true", "config key 'policy.model.noisy' is not read by policy.type 'dqn': "
                                                "remove it (it is read by c51, qrdqn)"),
    ("cartpole-c51", "policy.learn.kappa=2", "config key 'policy.learn.kappa' is not read by policy.type 'c51': "
                                             "remove it (it is read by qrdqn)"),
    ("cartpole-qrdqn", "policy.model.v_max=5", "config key 'policy.model.v_max' is not read by policy.type "
                                               "'qrdqn': remove it (it is read by c51)"),
    ("cartpole-c51", "policy.model.v_min=200", "config key 'policy.model.v_min' (200.0) must be below "
                                               "policy.model.v_max (100.0)"),
    ("cartpole-c51", "policy.model.noisy_encoder=true", "policy.model.noisy_encoder needs policy.model.noisy=true"),
])
def test_keys_of_the_other_algorithms_are_refused_in_one_line(preset, override, message):
    with pytest.raises(ConfigError) as err:
        load_config(preset, [override])
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1


def test_the_distributional_keys_load():
    cfg = load_config("cartpole-qrdqn", ["policy.learn.kappa=0", "policy.learn.adam_eps=1.5e-4",
                                         "policy.model.num_quantiles=8"])
    assert (cfg.policy.learn.kappa, cfg.policy.learn.adam_eps, cfg.policy.model.num_quantiles) == (0.0, 1.5e-4, 8)
