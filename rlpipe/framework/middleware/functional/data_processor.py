"""Pipeline middleware between collector, buffer and learner: push, n-step, fetch.

- :func:`data_pusher` reads ``ctx.trajectories`` / ``ctx.episodes``, writes the buffer.
- :func:`nstep_reward_enhancer` reads and rewrites ``ctx.trajectories``.
- :func:`offpolicy_data_fetcher` writes ``ctx.train_data`` and, after its ``yield``, reads
  ``ctx.train_output["priority"]`` to update the priorities of exactly the batch it fetched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from rlpipe.config import ConfigError
from rlpipe.data import Buffer, SampledBatch
from rlpipe.data.nstep import NStepAccumulator
from rlpipe.utils.batch import num_rows, reject_failed_steps, stack_rows

GROUP_KEY = "env"
"""Meta key under which the pusher records each row's env (the fetcher's sequence groups)."""
COLLECTED = "train_iter_data_collected"

logger = logging.getLogger(__name__)


def data_pusher(cfg: Any, buffer_: Buffer, group_by_env: bool | None = None) -> Callable[[Any], None]:
    """Middleware pushing ``ctx.trajectories`` (one ``push_batch``) or each of ``ctx.episodes``.

    Rows get meta ``train_iter_data_collected`` (for staleness checks) and, with
    ``group_by_env`` (default: when ``cfg.policy.collect.unroll_len > 1``), ``env`` = their
    ``env_id``, which sequence sampling groups by. Rows are pushed as they are: the
    collectors hand on real transitions only (see :mod:`rlpipe.data.failed_steps`).
    """
    if group_by_env is None:
        group_by_env = cfg.policy.collect.unroll_len > 1

    def _push(ctx: Any) -> None:
        if ctx.trajectories is not None:
            batch = ctx.trajectories
            if isinstance(batch, Sequence):
                if not batch:
                    return
                batch = stack_rows(batch)
            reject_failed_steps(batch, "data_pusher")
            n = num_rows(batch)
            if n == 0:
                return
            meta = {COLLECTED: np.full(n, ctx.train_iter, dtype=np.int64)}
            if group_by_env:
                if "env_id" not in batch:
                    raise ValueError("data_pusher with group_by_env needs field 'env_id' in ctx.trajectories")
                meta[GROUP_KEY] = batch["env_id"]
            buffer_.push_batch(batch, meta)
        elif ctx.episodes is not None:
            for episode in ctx.episodes:
                buffer_.push(episode, {COLLECTED: ctx.train_iter})

    return _push


def nstep_reward_enhancer(cfg: Any) -> Callable[[Any], None]:
    """Middleware replacing ``ctx.trajectories`` by its n-step transitions (``cfg.policy.nstep``).

    Steps whose window is still open are held and come out in a later iteration, so the
    rows written may be fewer (or more) than the rows read. See :mod:`rlpipe.data.nstep`.
    With ``nstep`` 1 the rows pass unchanged.
    """
    accumulator = NStepAccumulator(cfg.policy.nstep, cfg.policy.discount_factor)
    one_step = accumulator.nstep == 1  # the 1-step transitions are the rows themselves

    def _nstep(ctx: Any) -> None:
        if ctx.trajectories is not None and not one_step:
            ctx.trajectories = accumulator.add(ctx.trajectories)

    return _nstep


def _concat(batches: list[SampledBatch]) -> dict[str, np.ndarray]:
    """Concatenate sampled batches; sources without IS weights count as weight 1."""
    with_weight = any("weight" in b.data for b in batches)
    parts = []
    for b in batches:
        data = dict(b.data)
        if with_weight and "weight" not in data:
            data["weight"] = np.ones(b.indices.shape, dtype=np.float32)
        parts.append(data)
    keys = parts[0].keys()
    for data in parts[1:]:
        if data.keys() != keys:
            raise ValueError(f"buffers hold different fields: {sorted(keys)} vs {sorted(data.keys())}")
    return {key: np.concatenate([data[key] for data in parts]) for key in keys}


def _learned_priority(train_output: Any) -> Any | None:
    """The ``priority`` of the last learn step (``train_output`` is its dict), or None if it has none."""
    if isinstance(train_output, list):
        if len(train_output) != 1:
            raise ValueError(
                f"fetcher priority update saw {len(train_output)} learn outputs; "
                "call its backward right after the trainer"
            )
        train_output = train_output[0]
    if not isinstance(train_output, Mapping):
        return None
    return train_output.get("priority")


def _as_numpy(values: Any) -> np.ndarray:
    """Learned priorities as a numpy array (a policy may give a tensor, a list or an array)."""
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    return np.asarray(values)


def check_priority_config(cfg: Any, buffers: list[Buffer]) -> None:
    """ConfigError when ``cfg.policy.priority`` (if the config has it) disagrees with the buffers.

    The buffers own the priority channel; the flag is only checked, so that a config asking
    for priority replay never trains silently without it, nor the reverse. A config without
    the field (the seed's middleware never read it) is accepted as it is.
    """
    wanted = getattr(getattr(cfg, "policy", None), "priority", None)
    if wanted is None:
        return
    have = [buf.has_priority_replay for buf in buffers]
    if bool(wanted) and not any(have):  # a uniform source may be mixed with a prioritised one
        raise ConfigError(
            "config key 'policy.priority' is true but no replay buffer has PriorityExperienceReplay "
            "(add it with buffer.use(...), or set policy.priority=false)"
        )
    if not wanted and any(have):
        raise ConfigError(
            "config key 'policy.priority' is false but the replay buffer uses PriorityExperienceReplay "
            "(set policy.priority=true so the policy learns with its importance weights)"
        )


def offpolicy_data_fetcher(
    cfg: Any,
    buffer_: Buffer | list[tuple[Buffer, float]] | dict[str, Buffer],
    data_shortage_warning: bool = False,
) -> Callable[[Any], Generator[None, None, None]]:
    """Generator middleware setting ``ctx.train_data`` to a sampled batch (None when data is short).

    ``buffer_``: one buffer; a list of ``(buffer, ratio)`` (``int(batch_size * ratio)`` rows
    from each, concatenated); or a dict of buffers (``train_data`` is a dict with one batch
    per key). With ``cfg.policy.collect.unroll_len > 1`` rows are sequences of that many
    consecutive steps of one env (fields [B, T, ...]). After ``yield``, when the learn output
    in ``ctx.train_output`` has ``priority``, it goes to each source buffer's
    ``update_priority`` for exactly the items fetched (a no-op for a buffer without priority
    replay). Reads ``cfg.policy.learn.batch_size``, ``cfg.policy.collect.unroll_len`` and
    checks ``cfg.policy.priority`` if present (:func:`check_priority_config`).
    """
    batch_size = cfg.policy.learn.batch_size
    unroll_len = cfg.policy.collect.unroll_len
    if isinstance(buffer_, Buffer):
        sources: list[tuple[str | None, Buffer, int]] = [(None, buffer_, batch_size)]
    elif isinstance(buffer_, Mapping):
        sources = [(key, buf, batch_size) for key, buf in buffer_.items()]
    elif isinstance(buffer_, (list, tuple)):
        sources = [(None, buf, int(batch_size * ratio)) for buf, ratio in buffer_]
    else:
        raise TypeError(
            f"buffer_ must be a Buffer, a list of (Buffer, ratio) or a dict; got {type(buffer_).__name__}"
        )
    if not sources:
        raise ValueError("offpolicy_data_fetcher needs at least one buffer")
    check_priority_config(cfg, [buf for _, buf, _ in sources])

    def available(buf: Buffer) -> int:
        return buf.count() if unroll_len <= 1 else buf.count_runs(unroll_len, GROUP_KEY)

    def draw(buf: Buffer, size: int) -> SampledBatch:
        if unroll_len <= 1:
            return buf.sample_batch(size)
        return buf.sample_batch(size, groupby=GROUP_KEY, unroll_len=unroll_len)

    def _fetch(ctx: Any) -> Generator[None, None, None]:
        stored = [(available(buf), size) for _, buf, size in sources]
        short = [(have, size) for have, size in stored if have < size]
        if short:
            if data_shortage_warning:
                have, need = short[0]
                logger.warning("replay buffer has %d samples, need %d: no training this round", have, need)
            ctx.train_data = None
            yield
            return
        batches = [draw(buf, size) for _, buf, size in sources]
        if isinstance(buffer_, Mapping):
            ctx.train_data = {key: batch.data for (key, _, _), batch in zip(sources, batches, strict=True)}
        else:
            ctx.train_data = batches[0].data if len(batches) == 1 else _concat(batches)
        yield
        learned = _learned_priority(ctx.train_output)
        if learned is None:
            return
        if isinstance(buffer_, Mapping):
            if not isinstance(learned, Mapping):
                raise ValueError(
                    "with a dict of buffers, train_output['priority'] must be a dict of the same keys"
                )
            for (key, buf, _), batch in zip(sources, batches, strict=True):
                buf.update_priority(batch.indices, _as_numpy(learned[key]))
            return
        values = _as_numpy(learned)
        offset = 0
        for (_, buf, size), batch in zip(sources, batches, strict=True):
            buf.update_priority(batch.indices, values[offset : offset + size])
            offset += size

    return _fetch
