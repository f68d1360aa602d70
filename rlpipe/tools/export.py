"""``rlpipe export``: a run's acting network as one ONNX or TorchScript file, for deployment
without rlpipe (the ONNX route needs the ``export`` extra).

The exported graph computes what ``rlpipe.load(run).predict(obs, deterministic=True)`` does,
for a batch: it takes the observations ``predict`` takes as ``[N, *obs_shape]`` (float32, or
images in their own integer dtype, e.g. MinAtar's ``uint8 [N, C, 10, 10]``) and returns the
env's actions. A recurrent agent's graph (r2d2) also takes ``state`` float32 ``[N, S]`` (zeros at
an episode's start) and returns ``next_state``, to feed back with the episode's next observation,
as ``predict(obs, state=...)`` does. Actions are
``int64 [N]`` for the DQN family (the greedy action, ``argmax_a Q(s, a)``, with C51's
and QR-DQN's ``Q`` the mean of the return distribution, noisy layers at their means) and
``float32 [N, action_dim]`` for the actor-critics (the actor's deterministic action: ``tanh(mean)``
of SAC's, CrossQ's and CQL's squashed Gaussian, ``mu(s)`` of TD3's, DDPG's, TD3+BC's and BC's
actor, the mean of IQL's Gaussian), with the policy's
observation normalisation (``model.obs_norm``) before the network and the env factory's action
rescaling from ``[-1, 1]`` to the env's bounds after it.

Envs whose observations pass through an observation wrapper on their way to the policy (goal
dicts, MiniGrid images) are refused: the wrapper's conversion runs in Python, outside the graph.
The conversions are the ones the :class:`~rlpipe.entry.agent.Agent` holds: export builds on it.
"""
from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlpipe.entry.agent import Agent, load
from rlpipe.errors import MissingDependencyError, RlpipeError
from rlpipe.model.continuous import Actor
from rlpipe.model.recurrent import RecurrentQ
from rlpipe.policy.actor_critic import OBS_NORM_CLIP, ActorCriticPolicy
from rlpipe.policy.base import RecurrentPolicy
from rlpipe.policy.q_learning import QLearningPolicy
from rlpipe.utils.running_stats import RunningMeanStd

FORMATS = ("onnx", "torchscript")
ONNX_OPSET = 17
INPUT_NAME, OUTPUT_NAME = "obs", "action"
STATE_INPUT_NAME, STATE_OUTPUT_NAME = "state", "next_state"
"""A recurrent graph's extra input and output (ONNX names must differ between the two)."""


class ExportError(RlpipeError, ValueError):
    """A run whose acting computation cannot be exported as one graph."""


class GreedyAction(nn.Module):
    """``obs`` ``[N, *obs_shape]`` -> ``argmax_a Q(obs, a)`` int64 ``[N]``, ``Q`` read from the
    network's output by the policy's ``q_values`` (the output itself for DQN, a distribution's
    mean for C51 and QR-DQN)."""

    def __init__(self, q_network: nn.Module, q_values: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.q_network = q_network
        self._q_values = q_values

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self._q_values(self.q_network(obs)).argmax(dim=1)


class RecurrentGreedyAction(nn.Module):
    """``(obs [N, *obs_shape], state float32 [N, S])`` -> ``(argmax_a Q, int64 [N], next_state
    float32 [N, S])``: one step of a recurrent Q-network (:class:`~rlpipe.model.recurrent.RecurrentQ`)."""

    def __init__(self, q_network: RecurrentQ) -> None:
        super().__init__()
        self.q_network = q_network

    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q, next_state = self.q_network.step(obs, state)
        return q.argmax(dim=1), next_state


class DeterministicAction(nn.Module):
    """``obs`` float32 ``[N, obs_dim]`` -> the actor's deterministic action in the env's bounds,
    float32 ``[N, action_dim]``: ``gain * a + bias`` of ``a`` in ``[-1, 1]``, after normalising
    ``obs`` with the policy's statistics (``obs_stats``; None: no normalisation)."""

    gain: torch.Tensor
    bias: torch.Tensor

    def __init__(self, actor: Actor, obs_stats: RunningMeanStd | None, gain: np.ndarray,
                 bias: np.ndarray) -> None:
        super().__init__()
        self.actor = actor
        self._obs_stats = obs_stats
        self.register_buffer("gain", torch.as_tensor(gain, dtype=torch.float32))
        self.register_buffer("bias", torch.as_tensor(bias, dtype=torch.float32))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self._obs_stats is not None:
            obs = self._obs_stats.normalize(obs, OBS_NORM_CLIP)  # the policy's own normalisation, as it acts
        return self.actor.deterministic(obs) * self.gain + self.bias


@dataclass(frozen=True)
class ExportedGraph:
    """What :func:`export_run` wrote: the file and the signature of its graph."""

    out: str
    format: str
    input: str
    output: str


def _affine_action_map(action_wrappers: Sequence[gym.ActionWrapper], size: int) -> tuple[np.ndarray, np.ndarray]:
    """``gain`` and ``bias`` such that the wrappers (outermost first) map a policy action ``a`` in
    ``[-1, 1]`` to ``gain * a + bias``; :class:`ExportError` when their map is not affine."""

    def to_env(action: np.ndarray) -> np.ndarray:
        for wrapper in action_wrappers:
            action = wrapper.action(action)
        return np.asarray(action, dtype=np.float64)

    ones = np.ones(size, dtype=np.float32)
    high, low = to_env(ones), to_env(-ones)
    gain, bias = (high - low) / 2, (high + low) / 2
    probe = np.random.default_rng(0).uniform(-1, 1, size).astype(np.float32)
    if not np.allclose(to_env(probe), gain * probe + bias, rtol=1e-5, atol=1e-6):
        names = ", ".join(type(w).__name__ for w in action_wrappers)
        raise ExportError(f"the env's action wrappers ({names}) do not rescale actions affinely; export cannot "
                          "put their conversion in the graph")
    return gain, bias


def acting_network(agent: Agent) -> nn.Module:
    """A CPU module computing ``agent.predict(obs, deterministic=True)`` on a float32 batch, from the
    conversions the agent holds (its observation and action wrappers)."""
    cfg, policy, action_wrappers = agent.cfg, agent.policy, agent.action_wrappers
    if agent.observation_wrappers:
        names = ", ".join(type(w).__name__ for w in agent.observation_wrappers)
        raise ExportError(f"env '{cfg.env.env_id}' converts its observations in Python ({names}) before the "
                          "policy sees them; export takes array observations only")
    if isinstance(policy, QLearningPolicy):
        if action_wrappers:
            raise ExportError(f"env '{cfg.env.env_id}' converts discrete actions in Python "
                              f"({type(action_wrappers[0]).__name__}); export cannot")
        if agent.recurrent:
            return RecurrentGreedyAction(cast(RecurrentQ, copy.deepcopy(policy.model).cpu()))
        return GreedyAction(copy.deepcopy(policy.model).cpu(), policy.q_values)
    if not isinstance(policy, ActorCriticPolicy):
        raise ExportError(f"policy.type '{cfg.policy.type}' has no exporter")
    gain, bias = _affine_action_map(action_wrappers, policy.actor.action_shape)
    obs_state = policy.acting_state_dict().get("obs_stats")
    obs_stats = None
    if obs_state is not None:
        obs_stats = RunningMeanStd(tuple(obs_state["mean"].shape))
        obs_stats.load_state_dict(obs_state)
    return DeterministicAction(copy.deepcopy(policy.actor).cpu(), obs_stats, gain, bias)


@dataclass(frozen=True)
class _Signature:
    """A graph's example inputs and the names of its inputs and outputs, in order."""

    examples: tuple[torch.Tensor, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def _save_onnx(module: nn.Module, signature: _Signature, out: Path) -> None:
    try:
        import onnx  # noqa: F401 - torch.onnx.export needs it
    except ImportError:
        raise MissingDependencyError("rlpipe export --format onnx needs onnx: pip install 'rlpipe[export]'") from None
    with warnings.catch_warnings():
        # torch's TorchScript-based ONNX exporter warns that it is deprecated in favour of the
        # torch.export one, which needs onnxscript besides onnx; this one still serves these MLPs.
        warnings.simplefilter("ignore", DeprecationWarning)
        # its advice for recurrent layers is to take the start state as an input, which recurrent graphs do
        warnings.filterwarnings("ignore", message="Exporting a model to ONNX with a batch_size other than 1")
        torch.onnx.export(module, signature.examples, str(out), dynamo=False, opset_version=ONNX_OPSET,
                          input_names=list(signature.inputs), output_names=list(signature.outputs),
                          dynamic_axes={name: {0: "batch"} for name in (*signature.inputs, *signature.outputs)})


def _save_torchscript(module: nn.Module, signature: _Signature, out: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated; TorchScript is what was asked
        torch.jit.trace(module, signature.examples, check_trace=False).save(str(out))


def _save(format: str, module: nn.Module, signature: _Signature, out: Path) -> None:
    """Trace ``module`` on the signature's examples into ``out``. The networks' checks of the
    observation size become constants of the trace (torch warns so): right, since the graph fixes
    that size."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        SAVERS[format](module, signature, out)


SAVERS: dict[str, Callable[[nn.Module, _Signature, Path], None]] = {
    "onnx": _save_onnx, "torchscript": _save_torchscript,
}


def export_run(run: str | Path, out: str | Path, format: str = "onnx") -> ExportedGraph:
    """Write the acting network of ``run`` (a run directory: its best checkpoint, else its final
    one; or a checkpoint file) to ``out`` as ``format`` (``onnx`` or ``torchscript``)."""
    if format not in SAVERS:
        raise ExportError(f"unknown export format '{format}' (use {' or '.join(FORMATS)})")
    agent = load(run, device="cpu")  # what q_values reads (C51's support) must sit with the CPU copy
    module = acting_network(agent).eval().requires_grad_(False)
    obs_shape = tuple(agent.observation_space.shape or ())
    # images keep their integer dtype: the graph's encoder scales them as in training
    obs_dtype = torch.uint8 if agent.observation_space.dtype == np.uint8 else torch.float32
    signature = _Signature((torch.zeros((2, *obs_shape), dtype=obs_dtype),), (INPUT_NAME,), (OUTPUT_NAME,))
    if agent.recurrent:
        state = cast(RecurrentPolicy, agent.policy).initial_state(2).cpu()
        signature = _Signature((*signature.examples, state), (INPUT_NAME, STATE_INPUT_NAME),
                               (OUTPUT_NAME, STATE_OUTPUT_NAME))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        _save(format, module, signature, out)
        results = module(*signature.examples)
    results = results if isinstance(results, tuple) else (results,)
    described = ", ".join(f"{name}: {_described(value)}" for name, value in zip(signature.inputs, signature.examples,
                                                                                 strict=True))
    returned = ", ".join(f"{name}: {_described(value)}" for name, value in zip(signature.outputs, results, strict=True))
    return ExportedGraph(str(out), format, described, returned)


def _described(value: torch.Tensor) -> str:
    """``dtype [N, ...]``: a graph input's or output's type, its batch dimension named ``N``."""
    return f"{str(value.dtype).removeprefix('torch.')} [{', '.join(['N', *map(str, value.shape[1:])])}]"

