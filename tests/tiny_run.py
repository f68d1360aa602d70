"""Overrides that make any preset's run finish in a second or two, for tests of the run's machinery
(files, resume, CLI), not of learning. Tests add their own on top; a later override of a key wins."""

TINY_RUN = [
    "run.max_env_step=200", "run.progress=false", "policy.collect.n_sample=40", "policy.learn.batch_size=16",
    "policy.eval.evaluator.eval_freq=10", "env.n_evaluator_episode=2", "env.evaluator_env_num=2",
]
