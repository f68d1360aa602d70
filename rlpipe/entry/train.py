"""``train(cfg, run_dir)``: the embedded single-process pipeline behind ``rlpipe train``."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    buffer_file,
    data_pusher,
    eps_greedy_handler,
    interaction_evaluator,
    latest_checkpoint,
    nstep_reward_enhancer,
    online_logger,
    progress_bar,
    restore_checkpoint,
    termination_checker,
)
from rlpipe.reward_model import HerRewardModel
from rlpipe.utils.checkpoint import load_checkpoint
from rlpipe.utils.metrics import MetricsWriter


class RunDirError(RlpipeError, ValueError):
    """The run directory cannot be used without overwriting an earlier run."""


def prepare_run_dir(run_dir: Path) -> Path:
    """Create ``run_dir``; refuse one that already holds a run, so nothing saved is lost."""
    if (run_dir / "config.yaml").exists():
        raise RunDirError(f"run directory {run_dir} already holds a run; choose another --run-dir")
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


@dataclass
class ResumePoint:
    """Where an earlier run in a run directory stopped: its latest checkpoint, buffer and summary."""

    checkpoint: dict[str, Any]
    buffer_path: Path
    summary: RunSummary

    @classmethod
    def find(cls, run_dir: Path) -> ResumePoint:
        """Read the resume point of ``run_dir``; one-line errors when something is missing."""
        if not (run_dir / "config.yaml").is_file():
            raise RunDirError(f"{run_dir} is not a run directory (no config.yaml): nothing to resume")
        latest = latest_checkpoint(run_dir)
        checkpoint = load_checkpoint(latest, required=("policy", "counters", "torch_rng"))
        summary_file = run_dir / "summary.json"
        summary = RunSummary.read(summary_file) if summary_file.is_file() else RunSummary()
        return cls(checkpoint, buffer_file(latest), summary)

    def restore(self, policy: Any, buffer: Any, ctx: OnlineRLContext) -> None:
        """Load policy, counters, RNG and replay buffer."""
        restore_checkpoint(self.checkpoint, policy, ctx)
        buffer.load_data(str(self.buffer_path))


def default_run_dir(cfg: Config, root: Path = Path("runs")) -> Path:
    """``runs/<exp_name>-seed<seed>``, with ``-2``, ``-3``, ... when taken."""
    base = root / f"{cfg.exp_name}-seed{cfg.seed}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def train(cfg: Config, run_dir: Path, resume: bool = False) -> RunSummary:
    """Train the agent ``cfg`` describes, writing config, metrics, checkpoints and summary to ``run_dir``.

    Everything that can be checked (env id, model sizes, HER settings, the run directory) is
    checked before the run directory is created. With ``resume``, ``run_dir`` holds an earlier
    run of this config: training continues from its latest checkpoint and saved buffer.
    """
    seed_everything(cfg.seed, cfg.run.torch_threads)
    collector_env, evaluator_env = make_envs(cfg)
    try:
        cfg = fill_model_shapes(cfg, collector_env)
        her_reward_model = make_her_reward_model(cfg) if cfg.policy.other.her is not None else None
        earlier = ResumePoint.find(run_dir) if resume else None
        if earlier is None:
            prepare_run_dir(run_dir)
        dump_config(cfg, run_dir / "config.yaml")
        tracker = summary_tracker(cfg.env.stop_value, earlier.summary if earlier else None)
        writer = MetricsWriter(run_dir)
        try:
            _run_pipeline(cfg, run_dir, collector_env, evaluator_env, her_reward_model, writer, tracker, earlier)
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
    earlier: ResumePoint | None,
) -> None:
    """Assemble the middleware (HER or plain transitions) and run until a stop condition."""
    policy = make_policy(cfg)
    buffer = make_buffer(cfg)
    ctx = OnlineRLContext()
    if earlier is not None:
        earlier.restore(policy, buffer, ctx)
        collector_env.reset(seed=cfg.seed + ctx.env_step)  # fresh episodes, not a replay of the first ones
    random_steps = cfg.policy.random_collect_size
    with task.start(ctx=ctx), progress_bar(cfg.run.max_env_step, cfg.run.progress) as show:
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
        saver = CkptSaver(policy, run_dir, cfg.run.save_freq, buffer_=buffer, keep_last=cfg.run.keep_checkpoints)
        task.use(saver)
        task.use(online_logger(writer, cfg.run.log_freq))
        task.use(tracker)
        task.use(show)
        task.run()
