"""DQN with hindsight experience replay on bit flipping.

Whole episodes go into the buffer; each training batch samples episodes and relabels their
goals with goals they actually reached, so even failed episodes teach something.
``build_parts`` makes the HER reward model from ``policy.other.her``.

    python examples/dqn_her.py [key=value ...]      e.g.  env.env_kwargs.n_bits=10
"""
import sys

from rlpipe.config import load_config
from rlpipe.framework import OnlineRLContext, Task
from rlpipe.framework.middleware import (
    EpisodeCollector,
    HERLearner,
    data_pusher,
    eps_greedy_handler,
    interaction_evaluator,
    termination_checker,
)
from rlpipe.recipes import build_parts


def main(overrides: list[str]) -> float:
    with build_parts(load_config("bitflip-her-dqn", overrides)) as parts:
        cfg, policy, buffer = parts.cfg, parts.policy, parts.buffer
        task = Task()
        with task.start(ctx=OnlineRLContext()):
            task.use(eps_greedy_handler(cfg))
            task.use(EpisodeCollector(cfg, policy.collect_mode, parts.collector_env, cfg.policy.random_collect_size))
            task.use(data_pusher(cfg, buffer))
            task.use(HERLearner(cfg, policy.learn_mode, buffer, parts.her_reward_model))
            task.use(interaction_evaluator(cfg, policy.eval_mode, parts.evaluator_env,
                                           stop_on_solve=cfg.run.stop_on_solve))
            task.use(termination_checker(cfg.run.max_env_step, cfg.run.max_train_iter))
            task.run()
            return task.ctx.last_eval_value


if __name__ == "__main__":
    print(f"last evaluation success rate: {main(sys.argv[1:]):.2f}")
