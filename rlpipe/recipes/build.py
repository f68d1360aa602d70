"""Build the pieces of a pipeline from a :class:`Config`: environments, policy, buffer.

:func:`build_parts` is the one assembly that ``rlpipe train``, the remote collectors and the
examples share (the environments come from :mod:`rlpipe.recipes.envs`).
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from math import prod
from types import TracebackType
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlpipe.config import Config, ConfigError
from rlpipe.config.algorithms import ALGORITHMS, ActionKind
from rlpipe.config.encoders import is_import_path
from rlpipe.data import Buffer, DequeBuffer, FrameStore, PriorityExperienceReplay
from rlpipe.data.buffer import SequenceBuffer
from rlpipe.data.buffer.middleware.frame_store import frame_store_nbytes
from rlpipe.data.dataset import DatasetBuffer
from rlpipe.envs import GoalLayout, VectorEnv, find_goal_layout
from rlpipe.envs.episode_stats import SUCCESS_KEYS
from rlpipe.envs.families import family_of
from rlpipe.model.encoders import (
    as_shape,
    categories,
    describe,
    encoder_kind,
    is_image,
    model_observation_space,
    obs_size,
    user_encoder,
)
from rlpipe.policy import Policy
from rlpipe.recipes.envs import make_env_factory, make_envs
from rlpipe.recipes.offline import dataset_buffer, open_offline_dataset
from rlpipe.reward_model import HerRewardModel, IcmRewardModel, IntrinsicRewardModel, RndRewardModel
from rlpipe.utils.imports import import_object

logger = logging.getLogger(__name__)


def computes_subnormals_as_zero() -> bool:
    """Whether this thread's CPU arithmetic computes subnormal floats as zero (torch sets it with
    ``set_flush_denormal`` but has no getter): a product of two normal floats whose result is
    subnormal comes out as zero."""
    return (torch.tensor([1e-30]) * 1e-9).item() == 0.0


@contextmanager
def acting_threads(cfg: Config) -> Iterator[None]:
    """torch's intra-op threads at ``run.torch_threads`` inside, the caller's count put back after.

    Acting outside training (``rlpipe.load``'s ``predict``, ``rlpipe eval``, dataset rollouts) runs a
    small network one batch at a time, as training does, where torch's default of one thread per
    core only adds waiting, many times over on a machine that other runs keep busy. Scoped, so a
    caller's own torch work keeps its setting; the switch costs far less than a step."""
    before = torch.get_num_threads()
    if before == cfg.run.torch_threads:
        yield
        return
    torch.set_num_threads(cfg.run.torch_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def prepare_torch(seed: int, torch_threads: int, flush_denormal: bool) -> bool:
    """Seed torch and numpy's global generators (environments are seeded at reset), set torch's
    threads and whether the CPU computes subnormal floats as zero (``run.flush_denormal``).

    Returns whether it computed them as zero before, for :meth:`Parts.close` to put back: the
    setting holds for the whole thread, the caller's own arithmetic included."""
    flushed_before = computes_subnormals_as_zero()
    torch.set_num_threads(torch_threads)
    if not torch.set_flush_denormal(flush_denormal) and flush_denormal:
        logger.warning("run.flush_denormal: this CPU cannot compute subnormal floats as zero; they stay IEEE")
    torch.manual_seed(seed)
    np.random.seed(seed)
    return flushed_before


def _action_size(cfg: Config, action_space: gym.Space) -> int:
    """The model's action size for ``cfg.policy.type`` on ``action_space``; a one-line error on a mismatch."""
    policy_type, env_id, space = cfg.policy.type, cfg.env.env_id, describe(action_space)
    if ALGORITHMS[policy_type].action_kind is ActionKind.CONTINUOUS:
        if not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) != 1:
            raise ConfigError(
                f"policy.type '{policy_type}' needs a continuous (flat Box) action space; "
                f"env '{env_id}' has {space}"
            )
        if not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
            raise ConfigError(f"policy.type '{policy_type}' needs bounded actions; env '{env_id}' has {space}")
        return int(action_space.shape[0])
    if isinstance(action_space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        values = (action_space.nvec if isinstance(action_space, gym.spaces.MultiDiscrete)
                  else np.full(action_space.shape, 2))
        combos = prod(int(n) for n in np.asarray(values).reshape(-1))  # Python ints: 2**64 and more stay exact
        raise ConfigError(
            f"policy.type '{policy_type}' picks one of n actions (Discrete); env '{env_id}' has {space}: "
            f"add a wrapper to env.wrappers that offers Discrete({combos}) and maps each index to its action "
            "vector (np.unravel_index), or use a continuous-action policy (sac, td3) with an action wrapper"
        )
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError(
            f"policy.type '{policy_type}' needs a discrete action space; env '{env_id}' has {space}"
        )
    if action_space.start != 0:  # the policy's actions are indices 0..n-1
        raise ConfigError(f"policy.type '{policy_type}' acts with 0..n-1; env '{env_id}' has actions {space} "
                          f"from {action_space.start} (shift them with an action wrapper in env.wrappers)")
    return int(action_space.n)


def fill_model_shapes(cfg: Config, env: VectorEnv) -> Config:
    """Take the model's input and output sizes from the environment, checking any set in the config.

    A ``Box`` (any shape), ``MultiBinary``, ``Discrete`` or ``MultiDiscrete`` observation space is
    read by the encoders (``Dict`` and ``Tuple`` spaces arrive flattened by the env factory); a
    ``Discrete`` or ``MultiDiscrete`` one is described by ``obs_categories``, its number of values per
    dimension, with ``obs_shape`` its number of dimensions."""
    obs_space = env.observation_space
    learnable = (gym.spaces.Box, gym.spaces.MultiBinary, gym.spaces.Discrete, gym.spaces.MultiDiscrete)
    if not isinstance(obs_space, learnable):
        raise ConfigError(f"env '{cfg.env.env_id}' has observations {describe(obs_space)}; the models read Box, "
                          "MultiBinary, Discrete, MultiDiscrete and Dict observations")
    start = getattr(obs_space, "start", 0)  # Discrete and MultiDiscrete values may start elsewhere
    if np.any(start != 0):
        raise ConfigError(f"env '{cfg.env.env_id}' has observations {describe(obs_space)} that start at "
                          f"{start}; the one-hot encoding needs values from 0 (shift them with a wrapper)")
    try:
        encoder_kind(obs_space, cfg.policy.model.encoder)
    except ValueError as err:
        raise ConfigError(f"env '{cfg.env.env_id}': {err}") from None
    check_user_encoders(cfg, obs_space)
    nvec = categories(obs_space)
    shape = (len(nvec),) if nvec is not None else tuple(int(n) for n in obs_space.shape or ())
    obs_shape = shape[0] if len(shape) == 1 else shape  # a vector's shape is written as its size, as configs have it
    action_shape = _action_size(cfg, env.action_space)
    model = cfg.policy.model
    given_and_needed: dict[str, tuple[object, object]] = {
        "obs_shape": (model.obs_shape, obs_shape), "action_shape": (model.action_shape, action_shape),
    }
    if nvec is not None:
        given_and_needed["obs_categories"] = (model.obs_categories, list(nvec))
    for key, (given, size) in given_and_needed.items():
        if given is not None and given != size:
            raise ConfigError(
                f"config key 'policy.model.{key}' is {given} but env '{cfg.env.env_id}' needs {size}"
            )
    filled = cfg.model_copy(deep=True)
    filled.policy.model.obs_shape = obs_shape
    filled.policy.model.action_shape = action_shape
    if nvec is not None:  # Discrete and MultiDiscrete: integers in the buffer, one-hot in the encoder
        filled.policy.model.obs_categories = list(nvec)
    if isinstance(obs_space, gym.spaces.Box) and is_image(obs_space) and obs_space.dtype == np.uint8:
        # the encoders keep images uint8 and scale them by high
        filled.policy.model.obs_dtype = "uint8"
        filled.policy.model.obs_high = float(np.max(obs_space.high))
    return filled


def check_user_encoders(cfg: Config, obs_space: gym.Space) -> None:
    """Build each ``package.module:Class`` encoder the config names once, on ``obs_space``, so that one
    that does not import or build is a one-line error naming its key before the run starts (with
    torch's generator forked: the networks' initial weights are what they would be without it)."""
    named: dict[str, tuple[str, dict[str, Any]]] = {
        "policy.model": (cfg.policy.model.encoder, cfg.policy.model.encoder_kwargs)}
    if cfg.reward_model is not None:
        named["reward_model"] = (cfg.reward_model.encoder, cfg.reward_model.encoder_kwargs)
    for section, (encoder, kwargs) in named.items():
        if not is_import_path(encoder):
            continue
        with torch.random.fork_rng(devices=[]):
            try:
                user_encoder(encoder, obs_space, dict(kwargs))
            except ValueError as err:
                raise ConfigError(f"config key '{section}.encoder': {err}") from None


def policy_class(policy_type: str) -> Callable[..., Policy]:
    """The policy class of ``policy_type``, imported from the path its row of the algorithm table names."""
    cls: Callable[..., Policy] = import_object(ALGORITHMS[policy_type].policy_class)
    return cls


def make_policy(cfg: Config) -> Policy:
    """The policy named by ``cfg.policy.type`` (model shapes must be filled in); ``policy.cuda``
    without a CUDA device is a one-line error, not a silent run on the CPU."""
    if cfg.policy.cuda and not torch.cuda.is_available():
        raise ConfigError(f"config key 'policy.cuda' is true but torch {torch.__version__} sees no CUDA device; "
                          "set policy.cuda=false")
    return policy_class(cfg.policy.type)(cfg.policy, seed=cfg.seed)


def available_memory() -> int:
    """Bytes of memory available to a new allocation (Linux ``MemAvailable``; else all physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def uses_frame_store(cfg: Config) -> bool:
    """Whether the buffer keeps frames once (``policy.other.replay_buffer.frame_store``): ``auto``
    turns it on for an env family whose image observations are stacks of frames (ALE games'
    ``uint8 [4, 84, 84]``; not MinAtar's, whose channels are kinds of objects); ``true`` for any
    image observations (a user's own frame stacks). ``cfg`` must have the model's sizes filled in."""
    setting, model = cfg.policy.other.replay_buffer.frame_store, cfg.policy.model
    images = model.obs_dtype is not None and model.obs_shape is not None and not isinstance(model.obs_shape, int)
    if setting == "auto":
        return images and family_of(cfg.env.env_id).frame_stacks and cfg.policy.other.her is None
    if setting and not images:
        raise ConfigError(f"config key 'policy.other.replay_buffer.frame_store' is true but env '{cfg.env.env_id}' "
                          f"observes {model.obs_shape}, not stacks of image frames [K, H, W]")
    return bool(setting)


SEQUENCE_INDEX_BYTES = 80
"""About what the sequence buffer's index adds per stored step (measured: 75 bytes with sequences
overlapping by half)."""


def transition_nbytes(cfg: Config) -> tuple[int, int]:
    """Bytes a full replay buffer takes up front, and bytes per transition (for the message).

    A transition holds ``obs`` and ``next_obs`` (float32, or ``uint8`` images) and its action
    (float32 per dimension, or one int64 for a discrete action), reward and flags; with the
    frame store the two stacks are frame slots and each frame is kept once
    (:func:`~rlpipe.data.buffer.middleware.frame_store.frame_store_nbytes`); a sequence policy's
    steps also hold their recurrent state and the sequence index's share.
    """
    model, size = cfg.policy.model, cfg.policy.other.replay_buffer.replay_buffer_size
    assert model.obs_shape is not None and model.action_shape is not None
    continuous = ALGORITHMS[cfg.policy.type].action_kind is ActionKind.CONTINUOUS
    rest = (4 * model.action_shape if continuous else 8) + 32
    if uses_frame_store(cfg):
        stack, *frame = as_shape(model.obs_shape)
        need = frame_store_nbytes(size, frame, stack) + size * rest
        return need, need // size
    row = 2 * (1 if model.obs_dtype == "uint8" else 4) * obs_size(model.obs_shape) + rest
    if ALGORITHMS[cfg.policy.type].sequences:  # each step's recurrent state (an LSTM's h and c) and its index entry
        row += 4 * model.core_hidden * (2 if model.core == "lstm" else 1) + SEQUENCE_INDEX_BYTES
    return size * row, row


def check_buffer_fits(cfg: Config) -> None:
    """One line, before anything is allocated, when a transition buffer cannot fit in memory
    (:func:`transition_nbytes`). HER's buffer holds whole episodes, kept as they come, so it
    allocates nothing up front."""
    model = cfg.policy.model
    if cfg.policy.other.her is not None or model.obs_shape is None or model.action_shape is None:
        return
    size = cfg.policy.other.replay_buffer.replay_buffer_size
    (need, row), have = transition_nbytes(cfg), available_memory()
    if need > have:
        kept = " (each frame kept once)" if uses_frame_store(cfg) else ""
        raise ConfigError(
            f"config key 'policy.other.replay_buffer.replay_buffer_size': {size} transitions of about {row} bytes"
            f"{kept} need {need / 2**30:.1f} GiB; {have / 2**30:.1f} GiB of memory is available"
        )


def make_buffer(cfg: Config) -> Buffer:
    """The replay buffer: frames kept once for stacked frames (:func:`uses_frame_store`), priority
    replay when ``cfg.policy.priority``, sequences for a sequence policy (r2d2); one line when it
    cannot fit. ``rlpipe resume`` builds the same chain from the same config before it loads the
    saved data into it."""
    if not ALGORITHMS[cfg.policy.type].sequences:
        return make_transition_buffer(cfg)
    check_buffer_fits(cfg)
    replay, collect = cfg.policy.other.replay_buffer, cfg.policy.collect
    return SequenceBuffer(replay.replay_buffer_size, collect.unroll_len, collect.sequence_stride, seed=cfg.seed,
                          priority=cfg.policy.priority, priority_alpha=replay.priority_power_factor,
                          priority_beta=replay.IS_weight_power_factor, priority_eta=cfg.policy.learn.priority_eta)


def make_transition_buffer(cfg: Config) -> DequeBuffer:
    """The buffer of single transitions (every policy but a sequence policy's): see :func:`make_buffer`."""
    check_buffer_fits(cfg)
    replay = cfg.policy.other.replay_buffer
    buffer = DequeBuffer(size=replay.replay_buffer_size, seed=cfg.seed)
    if uses_frame_store(cfg):
        buffer.use(FrameStore(buffer))
    if cfg.policy.priority:
        buffer.use(PriorityExperienceReplay(
            buffer,
            IS_weight=cfg.policy.priority_IS_weight,
            priority_power_factor=replay.priority_power_factor,
            IS_weight_power_factor=replay.IS_weight_power_factor,
            IS_weight_anneal_train_iter=replay.IS_weight_anneal_train_iter,
        ))
    return buffer


@dataclass(frozen=True)
class GoalProbe:
    """What one env of a config says about goals: what eval_metric ``auto`` and HER need to know."""

    layout: GoalLayout | None
    """Its goal layout when it observes a goal dict (None: flat observations)."""
    has_compute_reward: bool
    """Whether it offers ``compute_reward(achieved_goal, desired_goal, info)``."""
    reports_success: bool
    """Whether a goal env's step reports success (``is_success`` or ``success`` in its info)."""


def probe_goals(cfg: Config) -> GoalProbe:
    """Make one env of ``cfg``, reset and step a goal env once with a random action, and close it."""
    probe = make_env_factory(cfg)()
    try:
        layout = find_goal_layout(probe)
        has_compute_reward = callable(getattr(probe.unwrapped, "compute_reward", None))
        reports_success = False
        if layout is not None:
            probe.reset(seed=cfg.seed)
            probe.action_space.seed(cfg.seed)
            info = probe.step(probe.action_space.sample())[-1]
            reports_success = any(key in info for key in SUCCESS_KEYS)
        return GoalProbe(layout, has_compute_reward, reports_success)
    finally:
        probe.close()


def resolve_eval_metric(cfg: Config, goals: GoalProbe) -> Config:
    """``cfg`` with ``env.eval_metric`` ``auto`` made concrete: success_rate for goal envs that
    report success (``info['is_success']``), else return."""
    if cfg.env.eval_metric != "auto":
        return cfg
    resolved = cfg.model_copy(deep=True)
    resolved.env.eval_metric = "success_rate" if goals.reports_success else "return"
    return resolved


def make_her_reward_model(cfg: Config, goals: GoalProbe) -> HerRewardModel:
    """HER relabelling for ``cfg.policy.other.her``: bit-flip style observations by default, or
    through a goal environment's own ``compute_reward`` when the env observes a goal dict."""
    her = cfg.policy.other.her
    if her is None:
        raise ConfigError("config key 'policy.other.her' must be set to use hindsight experience replay")
    if goals.layout is None and not goals.has_compute_reward:
        raise ConfigError(
            f"policy.other.her needs a goal env; env '{cfg.env.env_id}' has no compute_reward(achieved_goal, "
            "desired_goal, info) (a dict-observation goal env, or a flat one like rlpipe/BitFlip-v0)"
        )
    layout = goals.layout
    if layout is None:  # a flat goal env: [state | goal] halves, as rlpipe/BitFlip-v0
        return HerRewardModel(her)
    return HerRewardModel(her, merge_func=layout.merge, split_func=layout.split,
                          goal_reward_func=layout.reward, terminal_on_success=False)


def make_reward_model(cfg: Config) -> IntrinsicRewardModel | None:
    """The learned reward model ``cfg.reward_model`` names (None when it is off).

    ``cfg`` must have the model's sizes filled in (:func:`fill_model_shapes`); ICM's action
    count is dqn's ``action_shape`` (the config refuses ICM with continuous policies). Built
    after the policy, from torch's generator as seeded by :func:`build_parts`.
    """
    rm, model = cfg.reward_model, cfg.policy.model
    if rm is None:
        return None
    if model.obs_shape is None or model.action_shape is None:
        raise ValueError("cfg.policy.model.obs_shape and action_shape must be set (from the env) for the reward model")
    obs_space = model_observation_space(model)
    if rm.type == "rnd":
        return RndRewardModel(rm, obs_space)
    return IcmRewardModel(rm, obs_space, model.action_shape)


@dataclass
class Parts:
    """What a training pipeline is made of, built from one config (:func:`build_parts`).

    ``cfg`` is the config with the model's sizes and ``env.eval_metric`` filled in from the
    environment. Use it as a context manager to close the environments at the end.
    ``local_collector_env`` is None with a remote backend, whose collector actors make their own.
    """

    cfg: Config
    local_collector_env: VectorEnv | None
    evaluator_env: VectorEnv
    policy: Policy
    buffer: Buffer
    her_reward_model: HerRewardModel | None
    reward_model: IntrinsicRewardModel | None = None
    flushed_subnormals_before: bool = False
    """Whether the building thread computed subnormal floats as zero before :func:`prepare_torch`."""
    dataset: DatasetBuffer | None = None
    """The dataset of ``offline.dataset``; offline only, it is also :attr:`buffer` (no online buffer)."""

    @property
    def collector_env(self) -> VectorEnv:
        """The collector's vector environment (local backend only)."""
        if self.local_collector_env is None and self.cfg.offline_only:
            raise ConfigError("an offline run (offline.dataset_share=1) has no collector; set offline.dataset_share "
                              "below 1 to collect too")
        if self.local_collector_env is None:
            raise ConfigError(
                f"config key 'distributed.backend' is '{self.cfg.distributed.backend}': the collectors' "
                "environments live in the collector actors, not in the learner"
            )
        return self.local_collector_env

    def close(self) -> None:
        """Close the vector environments and put back the thread's handling of subnormal floats
        (``run.flush_denormal`` is the run's, not its caller's)."""
        if self.local_collector_env is not None:
            self.local_collector_env.close()
        self.evaluator_env.close()
        torch.set_flush_denormal(self.flushed_subnormals_before)

    def __enter__(self) -> Parts:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def build_parts(cfg: Config) -> Parts:
    """Prepare torch (:func:`prepare_torch`), then build environments, model sizes, HER relabelling,
    policy and buffer.

    The order is fixed (torch is seeded before the network is made), so one seed gives one
    run, from the command line or from a script.
    """
    flushed_before = prepare_torch(cfg.seed, cfg.run.torch_threads, cfg.run.flush_denormal)
    try:
        return _assemble(cfg, flushed_before)
    except BaseException:
        torch.set_flush_denormal(flushed_before)
        raise


def _assemble(cfg: Config, flushed_before: bool) -> Parts:
    """:func:`build_parts` after :func:`prepare_torch`; the environments are closed if a later piece fails."""
    collector_env, evaluator_env = make_envs(cfg)
    try:
        cfg = fill_model_shapes(cfg, evaluator_env)  # the same spaces as the collectors' envs
        her = cfg.policy.other.her is not None
        if her or cfg.env.eval_metric == "auto":  # one env, made once, answers both
            goals = probe_goals(cfg)
            cfg = resolve_eval_metric(cfg, goals)
        her_reward_model = make_her_reward_model(cfg, goals) if her else None
        dataset = None
        if cfg.offline is not None:
            cfg, dataset = open_offline_dataset(cfg, evaluator_env.observation_space, evaluator_env.action_space)
        policy = make_policy(cfg)
        reward_model = make_reward_model(cfg)
        if dataset is None:
            return Parts(cfg, collector_env, evaluator_env, policy, make_buffer(cfg), her_reward_model, reward_model,
                         flushed_before)
        online = make_transition_buffer(cfg) if cfg.offline is not None and cfg.offline.online else None
        data = dataset_buffer(cfg, dataset, online)
        buffer = data if online is None else online  # offline only: the dataset is the buffer saved and resumed
        return Parts(cfg, collector_env, evaluator_env, policy, buffer, her_reward_model, reward_model, flushed_before,
                     data)
    except BaseException:
        if collector_env is not None:
            collector_env.close()
        evaluator_env.close()
        raise
