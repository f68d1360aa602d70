"""Making datasets (``rlpipe dataset``): from a run's replay buffer, from a trained policy's (or
uniformly random) play, by mixing two, and describing one.

The D4RL recipe with these: a run stopped at about a third of expert return gives the
``medium`` policy (``rollout``) and its replay buffer up to then ``medium-replay``
(``from-run``); ``medium`` and ``expert`` rollouts mixed half and half are ``medium-expert``
(``mix``). Every dataset's manifest records where it came from (:func:`provenance`).
"""
from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlpipe.config import Config, load_config
from rlpipe.config.algorithms import ALGORITHMS, ActionKind, Exploration
from rlpipe.data import DequeBuffer, FrameStore
from rlpipe.data.dataset import COLUMNS, Dataset, DatasetError, find_episodes, write_dataset
from rlpipe.data.dataset.frames import STACK_FIELDS, FrameStacks, joined_stacks, to_frame_stacks
from rlpipe.data.failed_steps import FailedStepFilter
from rlpipe.framework.middleware import latest_checkpoint
from rlpipe.recipes.build import acting_threads, make_transition_buffer, uses_frame_store
from rlpipe.recipes.envs import make_env_factory, make_vector_env
from rlpipe.utils.batch import concat_batches
from rlpipe.utils.integrity import file_sha256
from rlpipe.utils.provenance import code_version

__all__ = ["ReferenceReturns", "copy_dataset", "dataset_from_run", "describe_dataset", "mix_datasets", "normalised",
           "rollout_dataset"]

ROLLOUT_CHUNK = 4096
"""Rows of stacked frames a rollout gathers before it keeps their frames once (memory stays near the
frames kept)."""
ReferenceReturns = Mapping[str, float] | None
"""``{"random": R, "expert": E}``: the returns a normalised score of 0 and 100 stands for."""


def provenance(source: str, cfg: Config | None = None, **more: Any) -> dict[str, Any]:
    """Where a dataset came from: ``source``, the run's preset (``exp_name``), seed and env, the
    rlpipe commit that made it, when, and ``more`` (checkpoint digest, parents, ...)."""
    record: dict[str, Any] = {"source": source, "made_by": code_version(),
                              "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if cfg is not None:
        record.update(preset=cfg.exp_name, seed=cfg.seed, policy_type=cfg.policy.type)
    return {**record, **more}


def _env_spaces(cfg: Config) -> tuple[gym.Space, gym.Space]:
    """The observation and action spaces the policy of ``cfg`` sees (after the env factory's wrappers)."""
    env = make_env_factory(cfg)()
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def _run_config(run_dir: Path) -> Config:
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise DatasetError(f"{run_dir} is not a run directory (no config.yaml)")
    return load_config(config_path)


def dataset_from_run(run_dir: str | Path, out: str | Path, reference_returns: ReferenceReturns = None,
                     overwrite: bool = False) -> Dataset:
    """The replay buffer saved with a run's latest checkpoint, as a dataset at ``out``.

    Its rows keep the buffer's order (oldest first). A run with n-step returns is refused: a
    dataset holds one-step transitions. A buffer that wrapped around starts inside episodes
    (the manifest says so; its first episodes do not count in the statistics)."""
    run_dir = Path(run_dir)
    cfg = _run_config(run_dir)
    if cfg.policy.nstep != 1:
        raise DatasetError(f"run {run_dir} stored {cfg.policy.nstep}-step returns (policy.nstep={cfg.policy.nstep}); "
                           "a dataset holds one-step transitions: make it from a run with policy.nstep=1, or with "
                           "`rlpipe dataset rollout`")
    if cfg.policy.other.her is not None:
        raise DatasetError(f"run {run_dir} stored whole episodes for HER; a dataset holds transitions")
    if ALGORITHMS[cfg.policy.type].sequences:
        raise DatasetError(f"run {run_dir} stored sequences for policy.type '{cfg.policy.type}'; a dataset holds "
                           "transitions: make one with `rlpipe dataset rollout`")
    unit = latest_checkpoint(run_dir)
    buffer = make_transition_buffer(cfg)
    buffer.load_data(str(unit.buffer_path))
    ids = buffer.ids_at(buffer.ordered_slots())
    if len(ids) == 0:
        raise DatasetError(f"the replay buffer of run {run_dir} ({unit.buffer_path.name}) is empty")
    columns = _buffer_rows(buffer, ids)
    observation_space, action_space = _env_spaces(cfg)
    source = provenance("run", cfg, run_dir=str(run_dir), checkpoint=unit.path.name,
                        checkpoint_sha256=file_sha256(unit.path), env_step=unit.state["counters"]["env_step"])
    return write_dataset(out, columns, observation_space, action_space, cfg.env.env_id, source,
                         reference_returns, first_partial=buffer.overwritten, overwrite=overwrite)


def _buffer_rows(buffer: DequeBuffer, ids: np.ndarray) -> dict[str, Any]:
    """The :data:`COLUMNS` of the items ``ids``; a buffer that keeps frames once (a
    :class:`~rlpipe.data.buffer.FrameStore`) gives its stacks as :class:`FrameStacks` over its frames
    (the frames they use, each once), never as whole stacks."""
    store = next((mw for mw in buffer.middleware if isinstance(mw, FrameStore)), None)
    if store is None:
        rows = buffer.sample_batch(len(ids), indices=ids).data
        return {name: rows[name] for name in COLUMNS}
    assert store.ring.frames is not None
    raw = buffer.stored_rows(ids)  # the stack fields as ring slots
    stacks = joined_stacks([{name: FrameStacks(store.ring.frames, raw[name]) for name in STACK_FIELDS}])
    return {name: stacks[name] if name in STACK_FIELDS else raw[name] for name in COLUMNS}


def _acting(cfg: Config, policy: Any, how: Acting, rng: np.random.Generator, env: Any) -> Any:
    """A function from observations to actions, as ``how`` says (see :class:`Acting`)."""
    continuous = ALGORITHMS[cfg.policy.type].action_kind is ActionKind.CONTINUOUS

    def act(obs: np.ndarray) -> np.ndarray:
        if policy is None:
            return env.random_actions()
        if how.sample:
            return np.asarray(policy.collect_mode.forward(obs))
        action = np.asarray(policy.eval_mode.forward(obs))
        if continuous and how.noise > 0:
            action = np.clip(action + rng.normal(0.0, how.noise, action.shape), -1.0, 1.0).astype(action.dtype)
        elif not continuous and how.eps > 0:
            explore = rng.random(len(action)) < how.eps
            action = np.where(explore, env.random_actions(), action)
        return action

    return act


@dataclass(frozen=True)
class Acting:
    """How a rollout acts: the policy's deterministic action, with a random one at probability ``eps``
    (discrete actions) or Gaussian ``noise`` of that std (continuous ones), or (``sample``) sampled as a
    stochastic policy (sac, iql) explores."""

    eps: float = 0.0
    noise: float = 0.0
    sample: bool = False

    def check(self, cfg: Config) -> None:
        """One line for a way of acting that ``cfg``'s policy does not have."""
        if not 0.0 <= self.eps <= 1.0 or self.noise < 0.0:
            raise DatasetError(f"--eps must be in [0, 1] and --noise at least 0; got {self.eps} and {self.noise}")
        if sum((self.eps > 0, self.noise > 0, self.sample)) > 1:
            raise DatasetError("use one of --eps, --noise and --sample")
        row = ALGORITHMS[cfg.policy.type]
        continuous = row.action_kind is ActionKind.CONTINUOUS
        if (self.eps > 0 and continuous) or (self.noise > 0 and not continuous):
            flag = "--eps" if self.eps > 0 else "--noise"
            raise DatasetError(f"{flag} does not apply to policy.type '{cfg.policy.type}' ("
                               f"{'continuous' if continuous else 'discrete'} actions): use "
                               f"{'--noise' if continuous else '--eps'}")
        if self.sample and row.exploration_of(cfg.policy) is not Exploration.SAMPLING:
            raise DatasetError(f"--sample needs a policy that samples its actions (sac, iql, cql, crossq); "
                               f"policy.type '{cfg.policy.type}' explores {row.exploration_of(cfg.policy).value}")

    @property
    def name(self) -> str:
        return "sample" if self.sample else "eps" if self.eps else "noise" if self.noise else "deterministic"


def rollout_dataset(
    source: str | Path, out: str | Path, episodes: int, eps: float = 0.0, noise: float = 0.0, seed: int = 0,
    random_actions: bool = False, num_envs: int = 8, reference_returns: ReferenceReturns = None,
    overwrite: bool = False, sample: bool = False,
) -> Dataset:
    """``episodes`` whole episodes played by a trained run's policy (its best, else final checkpoint, as
    ``rlpipe.load`` picks), or uniformly at random with ``random_actions`` (``source`` may then be a preset
    or a config), on ``num_envs`` evaluation envs seeded from ``seed``. ``eps``, ``noise`` and ``sample``:
    see :class:`Acting`."""
    if episodes < 1:
        raise DatasetError(f"--episodes must be positive, got {episodes}")
    how = Acting(eps, noise, sample)
    policy, detail = None, {}
    if random_actions:
        path = Path(source)
        cfg = _run_config(path) if path.is_dir() else load_config(str(source))
    else:
        from rlpipe.entry.agent import load

        agent = load(source)
        cfg, policy = agent.cfg, agent.policy
        assert agent.checkpoint is not None
        detail = {"checkpoint": str(agent.checkpoint.path), "checkpoint_sha256": file_sha256(agent.checkpoint.path)}
    if not random_actions:
        how.check(cfg)
    with acting_threads(cfg):
        rows = _play(cfg, policy, episodes, how, seed, num_envs, frames=uses_frame_store(cfg))
    observation_space, action_space = _env_spaces(cfg)
    record = provenance("rollout", cfg, acting="random" if random_actions else how.name, eps=eps, noise=noise,
                        rollout_seed=seed, **detail)
    return write_dataset(out, rows, observation_space, action_space, cfg.env.env_id, record, reference_returns,
                         overwrite=overwrite)


def _play(cfg: Config, policy: Any, episodes: int, how: Acting, seed: int, num_envs: int,
          frames: bool = False) -> dict[str, Any]:
    """The rows of the first ``episodes`` whole episodes played on ``num_envs`` envs (each episode's rows
    together, in time order). With ``frames`` the observations come as :class:`FrameStacks`, each
    :data:`ROLLOUT_CHUNK` rows' frames kept once as they are played (the stacks are never all in memory)."""
    env = make_vector_env(cfg, num_envs, seed)
    try:
        act = _acting(cfg, policy, how, np.random.default_rng(seed), env)
        env.reset(seed=seed)
        clean, pieces, chunks, finished, pending = FailedStepFilter(), [], [], 0, 0
        while finished < episodes:
            step = env.step(act(env.obs))
            finished += int(np.count_nonzero(step["terminated"] | step["truncated"]))
            ready = clean.add(step)
            if ready is not None:
                pieces.append(ready)
                pending += len(ready["reward"])
            if frames and pending >= ROLLOUT_CHUNK:
                chunks.append(_frame_chunk(pieces))
                pieces, pending = [], 0
        last = clean.release()
        if last is not None:
            pieces.append(last)
    finally:
        env.close()
    if frames:
        batch = _joined_rows([*chunks, *([_frame_chunk(pieces)] if pieces else [])])
    else:
        batch = {name: np.asarray(value) for name, value in concat_batches(pieces).items()}
    found = find_episodes(batch["env_id"], batch["terminated"] | batch["truncated"], batch["reward"])
    keep = np.concatenate(sorted(found.rows, key=lambda rows: rows[-1])[:episodes])  # the first to finish
    return _rows_of(batch, keep)


def _frame_chunk(pieces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``pieces`` joined, their observations as :class:`FrameStacks` (each distinct frame once)."""
    batch = {name: np.asarray(value) for name, value in concat_batches(pieces).items() if name in COLUMNS}
    return {**batch, **to_frame_stacks(batch)}


def _joined_rows(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows whose observations are :class:`FrameStacks` (rollout chunks, a mix's two datasets) as one:
    columns concatenated, frame stacks over one frames array."""
    joined = {name: np.concatenate([part[name] for part in parts]) for name in COLUMNS if name not in STACK_FIELDS}
    return {**joined, **joined_stacks(parts)}


def _rows_of(columns: Mapping[str, Any], rows: np.ndarray) -> dict[str, Any]:
    """The :data:`COLUMNS` at ``rows``; frame stacks stay frame stacks, over only the frames they use."""
    if isinstance(columns["obs"], FrameStacks):
        taken = joined_stacks([{name: columns[name].take(rows) for name in STACK_FIELDS}])
        return {name: taken[name] if name in STACK_FIELDS else columns[name][rows] for name in COLUMNS}
    return {name: columns[name][rows] for name in COLUMNS}


def mix_datasets(first: str | Path, second: str | Path, ratio: float, out: str | Path,
                 reference_returns: ReferenceReturns = None, overwrite: bool = False) -> Dataset:
    """A dataset whose rows are ``ratio`` from ``first`` and the rest from ``second``, as many as the two
    allow (``medium-expert``: ``medium`` and ``expert`` at 0.5). Each takes its whole episodes in their
    order, so no episode is cut; the second's env ids are shifted past the first's. Both must hold the
    same spaces; reference returns default to the first's."""
    if not 0.0 < ratio < 1.0:
        raise DatasetError(f"--ratio must be between 0 and 1 (the first dataset's share), got {ratio}")
    a, b = Dataset.open(first), Dataset.open(second)
    for what in ("observation_space", "action_space"):
        if a.manifest[what] != b.manifest[what]:
            raise DatasetError(f"{a.path} and {b.path} hold different {what.replace('_', ' ')}s: "
                               f"{getattr(a, what)} vs {getattr(b, what)}")
    total = min(a.size / ratio, b.size / (1.0 - ratio))
    rows_a = _whole_episode_rows(a, round(total * ratio))
    rows_b = _whole_episode_rows(b, round(total * (1.0 - ratio)))
    parts = [_rows_of(a.columns, rows_a), _rows_of(b.columns, rows_b)]
    parts[1]["env_id"] = parts[1]["env_id"] + int(a.columns["env_id"].max()) + 1
    if any(isinstance(part["obs"], FrameStacks) for part in parts):  # frames once: both kept so
        columns = _joined_rows([part if isinstance(part["obs"], FrameStacks) else {**part, **to_frame_stacks(part)}
                                  for part in parts])
    else:
        columns = {name: np.concatenate([part[name] for part in parts]) for name in COLUMNS}
    record = provenance("mix", ratio=ratio, parents=[{"path": str(d.path), "seal": d.seal} for d in (a, b)])
    return write_dataset(out, columns, a.observation_space, a.action_space, a.env_id, record,
                         reference_returns or a.manifest.get("reference_returns"), overwrite=overwrite)


def _whole_episode_rows(dataset: Dataset, rows: int) -> np.ndarray:
    """Rows of ``dataset``'s whole episodes, in the order they end, until at least ``rows`` are taken."""
    episodes = sorted(dataset.episodes().rows, key=lambda r: r[-1])
    if not episodes:
        raise DatasetError(f"dataset {dataset.path} holds no whole episode to mix")
    lengths = np.cumsum([len(r) for r in episodes])
    count = int(np.searchsorted(lengths, rows)) + 1
    return np.concatenate(episodes[:count])


def normalised(value: float, reference: ReferenceReturns) -> float | None:
    """D4RL's normalised score ``100 * (value - random) / (expert - random)`` (None without references)."""
    if not reference:
        return None
    return 100.0 * (value - reference["random"]) / (reference["expert"] - reference["random"])


def describe_dataset(path: str | Path) -> dict[str, Any]:
    """What ``rlpipe dataset info`` prints: size, spaces, env, episode statistics (normalised when the
    manifest has reference returns), provenance and seal."""
    dataset = Dataset.open(path)
    m = dataset.manifest
    info: dict[str, Any] = {"path": str(dataset.path), "size": dataset.size, "env_id": dataset.env_id,
                            "observation_space": str(dataset.observation_space),
                            "action_space": str(dataset.action_space), "episodes": m["episodes"],
                            "reference_returns": m.get("reference_returns"), "provenance": m["provenance"],
                            "seal": m["seal"]}
    if dataset.stored_frames is not None:
        info["stored_frames"] = dataset.stored_frames  # observations as frame stacks, each frame once
    mean = m["episodes"].get("return_mean")
    if mean is not None and m.get("reference_returns"):
        info["normalised_return_mean"] = normalised(mean, m["reference_returns"])
    return info


def copy_dataset(source: str | Path, out: str | Path, reference_returns: ReferenceReturns = None,
                 overwrite: bool = False) -> Dataset:
    """Any dataset :func:`~rlpipe.recipes.offline.open_dataset` reads (a Minari one: ``minari:ID`` or its
    directory) written as an rlpipe dataset at ``out``, with its provenance and reference returns kept."""
    from rlpipe.recipes.offline import open_dataset

    dataset = open_dataset(source)
    record = {**dataset.manifest["provenance"], "copied_from": str(source)}
    return write_dataset(out, dataset.columns, dataset.observation_space, dataset.action_space, dataset.env_id,
                         record, reference_returns or dataset.manifest.get("reference_returns"),
                         bool(dataset.manifest.get("first_partial")), overwrite)
