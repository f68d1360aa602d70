"""DQN with hindsight experience replay on bit flipping.

Whole episodes go into the buffer; each training batch samples episodes and relabels their
goals with goals they actually reached, so even failed episodes teach something.

    python examples/dqn_her.py [key=value ...]      e.g.  env.env_kwargs.n_bits=10
"""
import sys

from rlpipe.config import load_config
from rlpipe.data import DequeBuffer
from rlpipe.envs import VectorEnvManager, env_factory
from rlpipe.framework import OnlineRLContext, task
from rlpipe.framework.middleware import (
    EpisodeCollector,
    HERLearner,
    data_pusher,
    eps_greedy_handler,
    interaction_evaluator,
    termination_checker,
)
from rlpipe.policy import DQNPolicy
from rlpipe.reward_model import HerRewardModel


def main(overrides: list[str]) -> float:
    cfg = load_config("bitflip-her-dqn", overrides)
    n_bits = cfg.env.env_kwargs["n_bits"]
    cfg = load_config(cfg, [f"policy.model.obs_shape={2 * n_bits}", f"policy.model.action_shape={n_bits}"])
    make_env = env_factory(cfg.env.env_id, cfg.env.env_kwargs)
    collector_env = VectorEnvManager(make_env, cfg.env.collector_env_num, seed=cfg.seed)
    evaluator_env = VectorEnvManager(make_env, cfg.env.evaluator_env_num, seed=cfg.seed + 10_000)
    policy = DQNPolicy(cfg.policy, seed=cfg.seed)
    buffer = DequeBuffer(size=cfg.policy.other.replay_buffer.replay_buffer_size, seed=cfg.seed)
    her_reward_model = HerRewardModel(cfg.policy.other.her)

    with task.start(ctx=OnlineRLContext()):
        task.use(eps_greedy_handler(cfg))
        task.use(EpisodeCollector(cfg, policy.collect_mode, collector_env))
        task.use(data_pusher(cfg, buffer))
        task.use(HERLearner(cfg, policy.learn_mode, buffer, her_reward_model))
        task.use(interaction_evaluator(cfg, policy.eval_mode, evaluator_env, stop_on_solve=True))
        task.use(termination_checker(max_env_step=cfg.run.max_env_step))
        task.run()
        return task.ctx.last_eval_value


if __name__ == "__main__":
    print(f"last evaluation success rate: {main(sys.argv[1:]):.2f}")
