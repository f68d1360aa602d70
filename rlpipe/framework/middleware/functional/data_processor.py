"""Pipeline middleware between collector, buffer and learner: push, n-step, fetch.

- :func:`data_pusher` reads ``ctx.trajectories`` / ``ctx.episodes``, writes the buffer.
- :func:`nstep_reward_enhancer` reads and rewrites ``ctx.trajectories``.
- :func:`offpolicy_data_fetcher` writes ``ctx.train_data`` and, after its ``yield``, reads
  ``ctx.train_output["priority"]`` to update the priorities of exactly the batch it fetched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Mapping
from typing import Any

import numpy as np

from rlpipe.data import Buffer, SampledBatch
from rlpipe.data.nstep import NStepAccumulator
from rlpipe.utils.batch import FAILED_STEP, end_episodes_at_failed_steps, num_rows, step_before

GROUP_KEY = "env"
"""Meta key under which the pusher records each row's env (the fetcher's sequence groups)."""
COLLECTED = "train_iter_data_collected"

logger = logging.getLogger(__name__)


def data_pusher(cfg: Any, buffer_: Buffer, group_by_env: bool | None = None) -> Callable[[Any], None]:
    """Middleware pushing ``ctx.trajectories`` (one ``push_batch``) or each of ``ctx.episodes``.

    Rows get meta ``train_iter_data_collected`` (for staleness checks) and, with
    ``group_by_env`` (default: when ``cfg.policy.collect.unroll_len > 1``), ``env`` = their
    ``env_id``, which sequence sampling groups by. Failed steps (placeholders of envs that
    raised) are not pushed, and the env's step before becomes the end of its episode, also
    when it was pushed in the previous call (see
    :func:`rlpipe.utils.batch.end_episodes_at_failed_steps`).
    """
    if group_by_env is None:
        group_by_env = cfg.policy.collect.unroll_len > 1
    previous: tuple[np.ndarray, np.ndarray] | None = None  # ids and env_id of the last push

    def _push(ctx: Any) -> None:
        nonlocal previous
        if ctx.trajectories is not None:
            if previous is not None and FAILED_STEP in ctx.trajectories:
                _end_stored_episodes(buffer_, ctx.trajectories, *previous)
            batch = end_episodes_at_failed_steps(ctx.trajectories)
            n = num_rows(batch)
            if n == 0:
                return
            meta = {COLLECTED: np.full(n, ctx.train_iter, dtype=np.int64)}
            if group_by_env:
                if "env_id" not in batch:
                    raise ValueError("data_pusher with group_by_env needs field 'env_id' in ctx.trajectories")
                meta[GROUP_KEY] = batch["env_id"]
            ids = buffer_.push_batch(batch, meta)
            previous = (ids, batch["env_id"]) if "env_id" in batch else None
        elif ctx.episodes is not None:
            for episode in ctx.episodes:
                buffer_.push(episode, {COLLECTED: ctx.train_iter})

    return _push


def _end_stored_episodes(buffer_: Buffer, batch: Mapping[str, np.ndarray], ids: np.ndarray, env_id: np.ndarray) -> None:
    """Truncate the stored step before each failed step of ``batch`` that has none before it in ``batch``.

    ``ids`` and ``env_id``: the rows of the previous push. A step already an episode's end, or
    no longer stored, is left alone.
    """
    if "env_id" not in batch:
        return
    env = batch["env_id"]
    first_failed = np.asarray(batch[FAILED_STEP], dtype=bool) & (step_before(env) < 0)
    for failed_env in env[first_failed]:  # crashes are rare: a loop over them only
        mine = np.flatnonzero(env_id == failed_env)
        if not len(mine):
            continue
        index = int(ids[mine[-1]])
        try:
            data = buffer_.get_by_index(index).data
        except KeyError:  # overwritten or deleted since
            continue
        if not (data["terminated"] or data["truncated"]):
            buffer_.update(index, data={**data, "truncated": np.True_})


def nstep_reward_enhancer(cfg: Any) -> Callable[[Any], None]:
    """Middleware replacing ``ctx.trajectories`` by its n-step transitions (``cfg.policy.nstep``).

    Steps whose window is still open are held and come out in a later iteration, so the
    rows written may be fewer (or more) than the rows read. See :mod:`rlpipe.data.nstep`.
    """
    accumulator = NStepAccumulator(cfg.policy.nstep, cfg.policy.discount_factor)

    def _nstep(ctx: Any) -> None:
        if ctx.trajectories is not None:
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


def _learned_priority(train_output: Any) -> Any:
    """The ``priority`` of the last learn step (``train_output`` is its dict)."""
    if isinstance(train_output, list):
        if len(train_output) != 1:
            raise ValueError(
                f"fetcher priority update saw {len(train_output)} learn outputs; "
                "call its backward right after the trainer"
            )
        train_output = train_output[0]
    if not isinstance(train_output, Mapping) or "priority" not in train_output:
        raise ValueError("cfg.policy.priority is set but ctx.train_output has no 'priority'")
    return train_output["priority"]


def _update_priority(buffer_: Buffer, indices: np.ndarray, priority: Any) -> None:
    priority = np.asarray(priority, dtype=np.float64)
    if indices.ndim == 2 and priority.shape == indices.shape[:1]:
        priority = np.repeat(priority[:, None], indices.shape[1], axis=1)  # one priority per sequence
    if priority.shape != indices.shape:
        raise ValueError(f"priority has shape {priority.shape}, the fetched batch's indices {indices.shape}")
    buffer_.update_batch(indices, {"priority": priority})


def offpolicy_data_fetcher(
    cfg: Any,
    buffer_: Buffer | list[tuple[Buffer, float]] | dict[str, Buffer],
    data_shortage_warning: bool = False,
) -> Callable[[Any], Generator[None, None, None]]:
    """Generator middleware setting ``ctx.train_data`` to a sampled batch (None when data is short).

    ``buffer_``: one buffer; a list of ``(buffer, ratio)`` (``int(batch_size * ratio)`` rows
    from each, concatenated); or a dict of buffers (``train_data`` is a dict with one batch
    per key). With ``cfg.policy.collect.unroll_len > 1`` rows are sequences of that many
    consecutive steps of one env (fields [B, T, ...]). After ``yield``, with
    ``cfg.policy.priority``, the priorities in ``ctx.train_output`` update the fetched items.
    """
    batch_size = cfg.policy.learn.batch_size
    unroll_len = cfg.policy.collect.unroll_len
    priority = cfg.policy.priority
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
        if not priority:
            return
        learned = _learned_priority(ctx.train_output)
        if isinstance(buffer_, Mapping):
            if not isinstance(learned, Mapping):
                raise ValueError(
                    "with a dict of buffers, train_output['priority'] must be a dict of the same keys"
                )
            for (key, buf, _), batch in zip(sources, batches, strict=True):
                _update_priority(buf, batch.indices, learned[key])
            return
        values = np.asarray(learned)
        offset = 0
        for (_, buf, size), batch in zip(sources, batches, strict=True):
            _update_priority(buf, batch.indices, values[offset : offset + size])
            offset += size

    return _fetch
