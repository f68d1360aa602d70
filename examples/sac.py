"""SAC on Pendulum, written as the pipeline it is.

    python examples/sac.py [key=value ...]      e.g.  seed=1 run.max_env_step=10000

Soft actor-critic samples its own exploring actions (no epsilon schedule): the collector
steps the env with them, in [-1, 1] (the env factory rescales them to the env's bounds),
after ``random_collect_size`` uniformly random steps. The learner makes
``policy.learn.replay_ratio`` gradient updates per env step.
"""
import sys

from rlpipe.config import load_config
from rlpipe.framework import OnlineRLContext, Task
from rlpipe.framework.middleware import (
    OffPolicyLearner,
    StepCollector,
    data_pusher,
    interaction_evaluator,
    nstep_reward_enhancer,
    termination_checker,
)
from rlpipe.recipes import build_parts


def main(overrides: list[str], preset: str = "pendulum-sac") -> float:
    with build_parts(load_config(preset, overrides)) as parts:
        cfg, policy, buffer = parts.cfg, parts.policy, parts.buffer
        task = Task()
        with task.start(ctx=OnlineRLContext()):
            task.use(StepCollector(cfg, policy.collect_mode, parts.collector_env, cfg.policy.random_collect_size))
            task.use(nstep_reward_enhancer(cfg))
            task.use(data_pusher(cfg, buffer))
            task.use(OffPolicyLearner(cfg, policy.learn_mode, buffer, log_freq=cfg.run.log_freq))
            task.use(interaction_evaluator(cfg, policy.eval_mode, parts.evaluator_env,
                                           stop_on_solve=cfg.run.stop_on_solve))
            task.use(termination_checker(cfg.run.max_env_step, cfg.run.max_train_iter))
            task.run()
            return task.ctx.last_eval_value


if __name__ == "__main__":
    print(f"last evaluation return: {main(sys.argv[1:]):.1f}")
