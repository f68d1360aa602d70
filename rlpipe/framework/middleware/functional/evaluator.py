"""Evaluation: run the greedy policy for whole episodes and report the mean return or the success rate."""
from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from rlpipe.envs.episode_stats import FinishedEpisode
from rlpipe.envs.protocol import VectorEnv
from rlpipe.errors import EnvironmentFailedError, RlpipeError
from rlpipe.framework.context import OnlineRLContext
from rlpipe.framework.task import Role, role_gated
from rlpipe.utils.batch import FAILED_STEP

logger = logging.getLogger(__name__)
MAX_FAILED_EPISODES_PER_EPISODE = 3


class EvaluationFailedError(EnvironmentFailedError):
    """Every episode of an evaluation ended in a failed environment step."""



def evaluation_actions(policy: Any, eps: float = 0.0) -> Callable[[Any], np.ndarray]:
    """What evaluation acts with: ``policy.forward`` (an ``eval_mode``), given ``eps`` when it is
    above 0 (``policy.eval.eps``, which only the DQN family reads), else called with the
    observations alone, as any ``eval_mode`` (the seed's, an actor-critic's) is."""
    return policy.forward if eps == 0 else functools.partial(policy.forward, eps=eps)


def evaluation_seed(run_seed: int, train_iter: int, env_step: int) -> int:
    """The env seed of the evaluation a run seeded ``run_seed`` makes at ``train_iter`` and ``env_step``.

    It depends on where the run is, not on how many evaluations this process made before: a
    resumed run plays the episodes the same run straight through would have, and successive
    evaluations see other start states. Below 2**31 - 2**16, so the envs' seeds ``seed + i`` fit an
    int32 (some simulators take no more)."""
    state = np.random.SeedSequence([run_seed, train_iter, env_step]).generate_state(1, dtype=np.uint64)[0]
    return int(state % (2**31 - 2**16))


def evaluate_episodes(policy: Any, env: VectorEnv, n_episode: int, eps: float = 0.0,
                      seed: int | None = None) -> dict[str, np.ndarray]:
    """Run ``n_episode`` episodes of ``policy`` (``forward(obs) -> action``) from a fresh reset,
    epsilon-greedy with ``eps`` (see :func:`evaluation_actions`); a policy with memory (its mode's
    ``memory``) starts each episode from a fresh state.

    Episodes are split evenly over the environments and the first ones to finish in each
    environment are counted, so that short episodes are not over-represented.
    The reset is seeded ``seed, seed + 1, ...`` when ``seed`` is given (a run's evaluations:
    :func:`evaluation_seed`); else each call starts new episodes from the environments' own
    random streams, so successive evaluations see different start states. An episode cut short
    by a failed environment step is not counted: its return is not the policy's (if failures grow with episode
    length, this favours short episodes). After ``MAX_FAILED_EPISODES_PER_EPISODE`` such
    episodes per requested one the evaluation ends with the episodes it has (fewer than
    asked, logged), so a flaky env does not stop the run; when none finished at all,
    :class:`EvaluationFailedError`.
    Returns ``episode_return`` and ``episode_length`` arrays of length ``n_episode``, and
    ``episode_success`` when the env reports ``is_success`` for every episode.
    """
    if n_episode < 1:
        raise ValueError(f"the number of evaluation episodes must be >= 1, got {n_episode}")
    quota = np.full(env.num_envs, n_episode // env.num_envs)
    quota[: n_episode % env.num_envs] += 1
    counted: list[FinishedEpisode] = []
    failed_episodes = 0
    act = evaluation_actions(policy, eps)
    memory = getattr(policy, "memory", None)  # a recurrent policy's states, reset where episodes start
    if seed is None:
        env.reset()  # a user's vector env may take no seed
    else:
        env.reset(seed=seed)
    episode_start = np.ones(env.num_envs, dtype=bool)
    while (quota > 0).any():
        if memory is not None:
            memory.begin(episode_start)
        step = env.step(act(env.obs))
        episode_start = step["terminated"] | step["truncated"]
        failed = step.get(FAILED_STEP, np.zeros(env.num_envs, dtype=bool))
        failed_episodes += int(np.count_nonzero(failed & (quota > 0)))  # envs still needed only
        for episode in env.finished_episodes:
            if quota[episode.env] > 0 and not failed[episode.env]:
                quota[episode.env] -= 1
                counted.append(episode)
        if failed_episodes > MAX_FAILED_EPISODES_PER_EPISODE * n_episode and (quota > 0).any():
            if not counted:
                raise EvaluationFailedError(
                    f"evaluation: {failed_episodes} episodes ended in a failed environment step and none of "
                    f"{n_episode} finished; the environment keeps failing"
                )
            logger.warning("evaluation: %d episodes ended in a failed environment step; evaluated on the %d "
                           "of %d that finished", failed_episodes, len(counted), n_episode)
            break
    output = {
        "episode_return": np.asarray([episode.episode_return for episode in counted]),
        "episode_length": np.asarray([episode.length for episode in counted]),
    }
    if all(episode.success is not None for episode in counted):
        output["episode_success"] = np.asarray([episode.success for episode in counted], dtype=bool)
    return output


@role_gated(Role.EVALUATOR)
class interaction_evaluator:  # noqa: N801 - lower case, like the seed's middleware functions
    """Every ``eval_freq`` train iterations, or each time ``ctx.env_step`` crosses a multiple of
    ``eval_every_env_steps`` (``cfg.policy.eval.evaluator``, one of the two), evaluate; set
    ``ctx.finish`` once ``stop_value`` is reached.

    The evaluation figure is the mean return, or the success rate when ``cfg.env.eval_metric``
    is ``success_rate`` (:func:`rlpipe.recipes.build.build_parts` resolves ``auto``; a config
    without the key, as the seed's, means the return).
    Reads ``ctx.train_iter``, ``ctx.env_step``, ``ctx.last_eval_iter``, ``ctx.last_eval_env_step``;
    writes ``ctx.eval_value`` (that figure), ``ctx.eval_output`` (per-episode returns and
    lengths), ``ctx.last_eval_iter``, ``ctx.last_eval_env_step``, ``ctx.last_eval_value``.
    Evaluates at the first call too, epsilon-greedy with ``cfg.policy.eval.eps`` (absent, as in
    the seed's configs: greedy). Each evaluation's episodes are seeded from ``cfg.seed`` (absent: 0)
    and the counters (:func:`evaluation_seed`), so a resumed run evaluates as a straight one. Env
    steps grow by whole collections, so an evaluation comes at the first call after a multiple is
    crossed (once, however many were crossed). An evaluation in which every episode ends in a
    failed env step is skipped (logged) and tried again at the next multiple; an env that cannot
    be made again stops the run. With ``stop_on_solve=False``
    training goes on after ``stop_value`` is reached (to see whether the policy stays good).
    """

    def __init__(self, cfg: Any, policy: Any, env: VectorEnv, render: bool = False,
                 stop_on_solve: bool = True) -> None:
        self._policy = policy
        self._env = env
        evaluator = cfg.policy.eval.evaluator
        self._eval_freq = evaluator.eval_freq
        self._every_env_steps = getattr(evaluator, "eval_every_env_steps", None)  # absent in the seed's configs
        if (self._eval_freq is None) == (self._every_env_steps is None):
            raise ValueError("cfg.policy.eval.evaluator: set exactly one of eval_freq and eval_every_env_steps")
        self._n_episode = cfg.env.n_evaluator_episode
        self._eps = float(getattr(cfg.policy.eval, "eps", 0.0))
        self._stop_value = cfg.env.stop_value
        self._by_success = getattr(cfg.env, "eval_metric", "return") == "success_rate"
        self._stop_on_solve = stop_on_solve
        self._run_seed = int(getattr(cfg, "seed", 0))  # absent in the seed's configs

    def _due(self, ctx: OnlineRLContext) -> bool:
        """Whether this iteration evaluates: the first time, then by train iterations or env steps."""
        if self._every_env_steps is not None:
            every = self._every_env_steps
            return ctx.last_eval_env_step < 0 or ctx.env_step // every > ctx.last_eval_env_step // every
        assert self._eval_freq is not None
        return ctx.last_eval_iter < 0 or ctx.train_iter - ctx.last_eval_iter >= self._eval_freq

    def __call__(self, ctx: OnlineRLContext) -> None:
        if not self._due(ctx):
            return
        ctx.last_eval_iter, ctx.last_eval_env_step = ctx.train_iter, ctx.env_step
        try:
            output = evaluate_episodes(self._policy, self._env, self._n_episode, self._eps,
                                       evaluation_seed(self._run_seed, ctx.train_iter, ctx.env_step))
        except EvaluationFailedError as err:  # a flaky env with long episodes: try again next time
            logger.warning("evaluation at env step %d skipped: %s", ctx.env_step, err)
            return
        value = self._figure(output)
        ctx.eval_value = value
        ctx.eval_output = output
        ctx.last_eval_value = value
        logger.info("eval at train_iter %d, env_step %d: %s %.3f", ctx.train_iter, ctx.env_step,
                    "success rate" if self._by_success else "mean return", value)
        if self._stop_on_solve and self._stop_value is not None and math.isfinite(value) and value >= self._stop_value:
            ctx.finish = True

    def _figure(self, output: dict[str, np.ndarray]) -> float:
        if not self._by_success:
            return float(output["episode_return"].mean())
        if "episode_success" not in output:
            raise RlpipeError("env.eval_metric is success_rate but the env does not report info['is_success'] "
                              "at the end of every episode; use env.eval_metric=return")
        return float(output["episode_success"].mean())
