"""``train(cfg, run_dir)``: the embedded single-process pipeline behind ``rlpipe train``."""
from __future__ import annotations

from pathlib import Path

from rlpipe.config import Config, dump_config
from rlpipe.entry.build import (
    fill_model_shapes,
    make_buffer,
    make_envs,
    make_her_reward_model,
    make_policy,
    seed_everything,
)
from rlpipe.entry.summary import RunSummary, summary_tracker
from rlpipe.envs import VectorEnvManager
from rlpipe.errors import RlpipeError
from rlpipe.framework import OnlineRLContext, task
from rlpipe.framework.middleware import (
    CkptSaver,
    EpisodeCollector,
    HERLearner,
    OffPolicyLearner,
    StepCollector,
    data_pusher,
    eps_greedy_handler,
    interaction_evaluator,
    nstep_reward_enhancer,
    online_logger,
    progress_bar,
    termination_checker,
)
from rlpipe.reward_model import HerRewardModel
from rlpipe.utils.metrics import MetricsWriter


class RunDirError(RlpipeError, ValueError):
    """The run directory cannot be used without overwriting an earlier run."""


def prepare_run_dir(run_dir: Path) -> Path:
    """Create ``run_dir``; refuse one that already holds a run, so nothing saved is lost."""
    if (run_dir / "config.yaml").exists():
        raise RunDirError(f"run directory {run_dir} already holds a run; choose another --run-dir")
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def default_run_dir(cfg: Config, root: Path = Path("runs")) -> Path:
    """``runs/<exp_name>-seed<seed>``, with ``-2``, ``-3``, ... when taken."""
    base = root / f"{cfg.exp_name}-seed{cfg.seed}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def train(cfg: Config, run_dir: Path) -> RunSummary:
    """Train the agent ``cfg`` describes, writing config, metrics, checkpoints and summary to ``run_dir``.

    Everything that can be checked (env id, model sizes, HER settings, the run directory) is
    checked before the run directory is created.
    """
    seed_everything(cfg.seed, cfg.run.torch_threads)
    collector_env, evaluator_env = make_envs(cfg)
    try:
        cfg = fill_model_shapes(cfg, collector_env)
        her_reward_model = make_her_reward_model(cfg) if cfg.policy.other.her is not None else None
        prepare_run_dir(run_dir)
        dump_config(cfg, run_dir / "config.yaml")
        tracker = summary_tracker(cfg.env.stop_value)
        writer = MetricsWriter(run_dir)
        try:
            _run_pipeline(cfg, run_dir, collector_env, evaluator_env, her_reward_model, writer, tracker)
        finally:
            writer.close()
            tracker.summary.write(run_dir / "summary.json")
    finally:
        collector_env.close()
        evaluator_env.close()
    return tracker.summary


def _run_pipeline(
    cfg: Config,
    run_dir: Path,
    collector_env: VectorEnvManager,
    evaluator_env: VectorEnvManager,
    her_reward_model: HerRewardModel | None,
    writer: MetricsWriter,
    tracker: summary_tracker,
) -> None:
    """Assemble the middleware (HER or plain transitions) and run until a stop condition."""
    policy = make_policy(cfg)
    buffer = make_buffer(cfg)
    random_steps = cfg.policy.random_collect_size
    with task.start(ctx=OnlineRLContext()), progress_bar(cfg.run.max_env_step, cfg.run.progress) as show:
        task.use(eps_greedy_handler(cfg))
        if her_reward_model is None:
            task.use(StepCollector(cfg, policy.collect_mode, collector_env, random_steps))
            if cfg.policy.nstep > 1:
                task.use(nstep_reward_enhancer(cfg))
            task.use(data_pusher(cfg, buffer))
            task.use(OffPolicyLearner(cfg, policy.learn_mode, buffer, log_freq=cfg.run.log_freq))
        else:
            task.use(EpisodeCollector(cfg, policy.collect_mode, collector_env, random_steps))
            task.use(data_pusher(cfg, buffer))
            task.use(HERLearner(cfg, policy.learn_mode, buffer, her_reward_model))
        task.use(interaction_evaluator(cfg, policy.eval_mode, evaluator_env, stop_on_solve=cfg.run.stop_on_solve))
        task.use(termination_checker(cfg.run.max_env_step, cfg.run.max_train_iter))
        task.use(CkptSaver(policy, run_dir, train_freq=cfg.run.save_freq))
        task.use(online_logger(writer, cfg.run.log_freq))
        task.use(tracker)
        task.use(show)
        task.run()
