"""DQN with a random-network-distillation bonus on DeepSea, written as the pipeline it is.

    python examples/dqn_rnd.py [key=value ...]      e.g.  seed=1 env.env_kwargs.size=10

DeepSea hides its only reward at the end of one path out of 2^N; epsilon-greedy DQN almost
never finds it. RND rewards reaching unfamiliar states, so the agent keeps pushing into the
unexplored corner until it finds the treasure. The reward model goes to the learner the way
the seed's ``OffPolicyLearner(cfg, policy, buffer_, reward_model)`` takes it: the learner
trains on the batch ``estimate`` returns (the replay buffer keeps the env's rewards), and
``reward_model_trainer`` trains the model itself on replayed transitions.
"""
import sys

from rlpipe.config import load_config
from rlpipe.framework import OnlineRLContext, Task
from rlpipe.framework.middleware import (
    OffPolicyLearner,
    StepCollector,
    data_pusher,
    eps_greedy_handler,
    interaction_evaluator,
    nstep_reward_enhancer,
    reward_model_trainer,
    termination_checker,
)
from rlpipe.recipes import build_parts


def main(overrides: list[str], preset: str = "deepsea-dqn-rnd") -> float:
    with build_parts(load_config(preset, overrides)) as parts:
        cfg, policy, buffer, reward_model = parts.cfg, parts.policy, parts.buffer, parts.reward_model
        task = Task()
        with task.start(ctx=OnlineRLContext()):
            task.use(eps_greedy_handler(cfg))
            task.use(StepCollector(cfg, policy.collect_mode, parts.collector_env, cfg.policy.random_collect_size))
            task.use(nstep_reward_enhancer(cfg))
            task.use(data_pusher(cfg, buffer))
            task.use(OffPolicyLearner(cfg, policy.learn_mode, buffer, reward_model, log_freq=cfg.run.log_freq))
            task.use(reward_model_trainer(cfg, reward_model, buffer))
            task.use(interaction_evaluator(cfg, policy.eval_mode, parts.evaluator_env,
                                           stop_on_solve=cfg.run.stop_on_solve))
            task.use(termination_checker(cfg.run.max_env_step, cfg.run.max_train_iter))
            task.run()
            return task.ctx.last_eval_value


if __name__ == "__main__":
    print(f"last evaluation return: {main(sys.argv[1:]):.1f}")
