"""DQN with prioritised experience replay on CartPole.

The buffer samples transitions in proportion to priority^alpha and corrects the bias with
importance weights; after each training round the learner's fetcher writes the new
|TD error| priorities back to exactly the transitions it trained on.

    python examples/dqn_per.py [key=value ...]
"""
import sys

from rlpipe.config import load_config
from rlpipe.data import DequeBuffer, PriorityExperienceReplay
from rlpipe.envs import VectorEnvManager, env_factory
from rlpipe.framework import OnlineRLContext, task
from rlpipe.framework.middleware import (
    OffPolicyLearner,
    StepCollector,
    data_pusher,
    eps_greedy_handler,
    interaction_evaluator,
    nstep_reward_enhancer,
    termination_checker,
)
from rlpipe.policy import DQNPolicy


def main(overrides: list[str]) -> float:
    cfg = load_config("cartpole-dqn-per", ["policy.model.obs_shape=4", "policy.model.action_shape=2", *overrides])
    make_env = env_factory(cfg.env.env_id)
    collector_env = VectorEnvManager(make_env, cfg.env.collector_env_num, seed=cfg.seed)
    evaluator_env = VectorEnvManager(make_env, cfg.env.evaluator_env_num, seed=cfg.seed + 10_000)
    policy = DQNPolicy(cfg.policy, seed=cfg.seed)
    replay = cfg.policy.other.replay_buffer
    buffer = DequeBuffer(size=replay.replay_buffer_size, seed=cfg.seed)
    buffer.use(PriorityExperienceReplay(
        buffer,
        IS_weight=cfg.policy.priority_IS_weight,
        priority_power_factor=replay.priority_power_factor,
        IS_weight_power_factor=replay.IS_weight_power_factor,
        IS_weight_anneal_train_iter=replay.IS_weight_anneal_train_iter,
    ))

    with task.start(ctx=OnlineRLContext()):
        task.use(eps_greedy_handler(cfg))
        task.use(StepCollector(cfg, policy.collect_mode, collector_env))
        task.use(nstep_reward_enhancer(cfg))
        task.use(data_pusher(cfg, buffer))
        task.use(OffPolicyLearner(cfg, policy.learn_mode, buffer))
        task.use(interaction_evaluator(cfg, policy.eval_mode, evaluator_env))
        task.use(termination_checker(max_env_step=cfg.run.max_env_step))
        task.run()
        return task.ctx.last_eval_value


if __name__ == "__main__":
    print(f"last evaluation return: {main(sys.argv[1:]):.1f}")
