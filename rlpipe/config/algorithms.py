"""The table of algorithms: what each ``policy.type`` is and which config keys it reads.

One :class:`Algorithm` row per ``policy.type`` says which policy class runs it (an import
path, resolved by ``rlpipe.recipes.build``, so this layer imports no policy), the kind of
actions it takes, how it explores, how it updates target networks, and the
``policy.learn`` / ``policy.model`` / ``policy.collect`` keys it reads besides
:data:`SHARED_KEYS`. Every place that depends on the algorithm reads its row; nothing
compares algorithm names. Adding an algorithm is a policy module, one row here and a preset.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Literal

__all__ = [
    "ACTION_KIND_KEYS", "ALGORITHMS", "ALGORITHM_KEYS", "ALGORITHM_SECTIONS", "EXPLORATION_KEYS", "SHARED_KEYS",
    "TARGET_KEYS", "ActionKind", "Algorithm", "Exploration", "PolicyType", "TargetUpdate", "learning_rate_keys",
]


class ActionKind(Enum):
    """The action space an algorithm acts in."""

    DISCRETE = "discrete"
    CONTINUOUS = "continuous"


class Exploration(Enum):
    """How an algorithm explores while collecting; the value completes "it explores ..."."""

    EPSILON = "epsilon-greedily"
    """A random action with probability epsilon, on the schedule ``policy.other.eps``."""
    SAMPLING = "by sampling its own actions"
    """The policy is stochastic: it samples (its entropy term keeps it exploring)."""
    GAUSSIAN_NOISE = "with Gaussian action noise"
    """``N(0, policy.collect.noise_sigma^2)`` added to a deterministic action."""
    NOISY_NETS = "with noisy networks (policy.model.noisy=true)"
    """Noise on the network's parameters, drawn anew every collect step (no epsilon)."""


class TargetUpdate(Enum):
    """How an algorithm keeps its target networks."""

    HARD_OR_SOFT = "hard or soft"
    """A copy every ``learn.target_update_freq`` updates, or Polyak averaging at ``learn.target_theta``."""
    SOFT = "soft"
    """Polyak averaging at ``learn.target_theta`` after each update."""
    NONE = "none"
    """No target networks: it bootstraps from its own networks."""


EXPLORATION_KEYS: dict[Exploration, tuple[str, ...]] = {
    Exploration.EPSILON: ("other.eps.type", "other.eps.start", "other.eps.end", "other.eps.decay"),
    Exploration.SAMPLING: (),
    Exploration.GAUSSIAN_NOISE: ("collect.noise_sigma",),
    Exploration.NOISY_NETS: (),
}
"""The keys (under ``policy.``) each way of exploring reads."""

TARGET_KEYS: dict[TargetUpdate, tuple[str, ...]] = {
    TargetUpdate.HARD_OR_SOFT: ("learn.target_update_freq", "learn.target_theta"),
    TargetUpdate.SOFT: ("learn.target_theta",),
    TargetUpdate.NONE: (),
}
"""The keys (under ``policy.``) each kind of target update reads."""

ACTION_KIND_KEYS: dict[ActionKind, tuple[str, ...]] = {
    ActionKind.DISCRETE: ("eval.eps",),
    ActionKind.CONTINUOUS: (),
}
"""The keys (under ``policy.``) each kind of action reads: the DQN family acts epsilon-greedily
at evaluation too (noisy networks included: with their means); actor-critics act with their
deterministic action."""

SHARED_KEYS = (
    "learn.batch_size", "learn.update_per_collect", "learn.replay_ratio", "learn.grad_clip", "learn.adam_betas",
    "learn.precision",
    "model.obs_shape", "model.obs_dtype", "model.obs_high", "model.obs_categories", "model.action_shape",
    "model.encoder", "model.encoder_kwargs", "model.encoder_hidden_size_list",
    "collect.n_sample", "collect.n_episode", "collect.unroll_len",
)
"""The keys (under ``policy.``) of the algorithm-dependent sections that every algorithm reads."""

ALGORITHM_SECTIONS = ("learn", "model", "collect", "other.eps")
"""The sections (under ``policy.``) whose keys some algorithms read and others do not."""

ALGORITHM_KEYS = ("eval.eps",)
"""Keys (under ``policy.``) outside :data:`ALGORITHM_SECTIONS` that some algorithms read and others do not."""

_SAME_JOB = {
    "learn.learning_rate": ("learn.learning_rate_actor", "learn.learning_rate_q", "learn.learning_rate_alpha"),
    "learn.learning_rate_actor": ("learn.learning_rate",),
    "learn.learning_rate_q": ("learn.learning_rate",),
    "learn.learning_rate_alpha": ("learn.learning_rate",),
    "learn.target_update_freq": ("learn.target_theta",),
    **{key: ("other.eps",) for key in EXPLORATION_KEYS[Exploration.GAUSSIAN_NOISE]},
    **{key: EXPLORATION_KEYS[Exploration.GAUSSIAN_NOISE] for key in EXPLORATION_KEYS[Exploration.EPSILON]},
}
"""Keys that do the job of another algorithm's key: the "use instead" of an unread key.
A section (``other.eps``) stands for its keys."""


@dataclass(frozen=True)
class Algorithm:
    """One row of the table: a ``policy.type`` and what it reads."""

    name: str
    """The ``policy.type`` value."""
    policy_class: str
    """Import path of its policy class, ``"package.module:ClassName"``."""
    action_kind: ActionKind
    exploration: Exploration
    target_update: TargetUpdate
    learn: tuple[str, ...]
    """The ``policy.learn`` keys it reads besides :data:`SHARED_KEYS` and its target keys."""
    model: tuple[str, ...] = ()
    """The ``policy.model`` keys it reads besides :data:`SHARED_KEYS`."""
    collect: tuple[str, ...] = ()
    """The ``policy.collect`` keys it reads besides :data:`SHARED_KEYS`."""
    sequences: bool = False
    """Whether it learns from sequences of ``collect.unroll_len`` steps with the recurrent state its
    collector had at their start (a sequence replay buffer; n-step returns inside the policy)."""
    noisy_nets: bool = False
    """Whether ``policy.model.noisy=true`` replaces its :attr:`exploration` with noisy networks."""
    learns_from_rewards: bool = True
    """Whether its losses read rewards (and so ``learn.reward_scale``); behaviour cloning's does not."""

    @property
    def target_networks(self) -> bool:
        """Whether it keeps target networks."""
        return self.target_update is not TargetUpdate.NONE

    def exploration_of(self, policy_cfg: object) -> Exploration:
        """How it explores under ``policy_cfg`` (``cfg.policy``): noisy networks when it has them
        and ``model.noisy`` is on, else :attr:`exploration`."""
        if self.noisy_nets and getattr(getattr(policy_cfg, "model", None), "noisy", False):
            return Exploration.NOISY_NETS
        return self.exploration

    @property
    def keys(self) -> tuple[str, ...]:
        """Every algorithm-dependent key (under ``policy.``: :data:`ALGORITHM_SECTIONS`,
        :data:`ALGORITHM_KEYS`) it reads with its default exploration."""
        return self.keys_for(self.exploration)

    def keys_for(self, exploration: Exploration) -> tuple[str, ...]:
        """Every algorithm-dependent key (under ``policy.``) it reads when exploring ``exploration``."""
        own = (*(f"learn.{k}" for k in self.learn), *(("learn.reward_scale",) if self.learns_from_rewards else ()),
               *(f"model.{k}" for k in self.model),
               *(f"collect.{k}" for k in self.collect))
        return (*SHARED_KEYS, *own, *TARGET_KEYS[self.target_update], *EXPLORATION_KEYS[exploration],
                *ACTION_KIND_KEYS[self.action_kind])

    @property
    def learning_rate_keys(self) -> tuple[str, ...]:
        """Its ``policy.learn`` learning-rate keys, as dotted config keys (for hints)."""
        return tuple(f"policy.learn.{k}" for k in self.learn if k.startswith("learning_rate"))

    def reads(self, key: str, exploration: Exploration | None = None) -> bool:
        """Whether it reads ``key``, a dotted config key (``policy.learn.alpha``), when exploring
        ``exploration`` (None: its default); keys outside :data:`ALGORITHM_SECTIONS` and
        :data:`ALGORITHM_KEYS` are read by every algorithm."""
        inner = key.removeprefix("policy.")
        dependent = inner in ALGORITHM_KEYS or inner.startswith(tuple(f"{section}." for section in ALGORITHM_SECTIONS))
        if inner == key or not dependent:
            return True
        return inner in self.keys_for(self.exploration if exploration is None else exploration)

    def unread_key_error(self, key: str, exploration: Exploration | None = None) -> str:
        """The one line for a config that sets ``key`` (under ``policy.``), which this algorithm does not
        read (when exploring ``exploration``; None: its default)."""
        exploration = self.exploration if exploration is None else exploration
        reason = ""
        if key in TARGET_KEYS[TargetUpdate.HARD_OR_SOFT] and not self.target_networks:
            reason = ", which has no target networks"
        elif any(key in keys for keys in EXPLORATION_KEYS.values()):
            reason = f", which explores {exploration.value}"
        instead = [alt for alt in _SAME_JOB.get(key, ()) if self._reads_section_or_key(alt, exploration)]
        if instead:
            advice = "use " + " / ".join(f"policy.{alt}" for alt in instead)
        else:
            readers = [row.name for row in ALGORITHMS.values() if key in row.keys]
            advice = "remove it" + (f" (it is read by {', '.join(readers)})" if readers and not reason else "")
        return f"config key 'policy.{key}' is not read by policy.type '{self.name}'{reason}: {advice}"

    def _reads_section_or_key(self, key: str, exploration: Exploration) -> bool:
        return any(own == key or own.startswith(f"{key}.") for own in self.keys_for(exploration))


_DISTRIBUTIONAL_LEARN = ("learning_rate", "double_q", "adam_eps", "cql_alpha")
_DISTRIBUTIONAL_MODEL = ("dueling", "noisy", "noisy_sigma0", "noisy_encoder")

_TD3_LEARN = ("learning_rate_actor", "learning_rate_q", "actor_update_freq", "noise_sigma", "noise_clip")
_SAC_LEARN = ("learning_rate_actor", "learning_rate_q", "learning_rate_alpha", "alpha", "auto_alpha",
              "target_entropy")

ALGORITHMS: Mapping[str, Algorithm] = {
    row.name: row
    for row in (
        Algorithm(
            "dqn", "rlpipe.policy.dqn:DQNPolicy", ActionKind.DISCRETE, Exploration.EPSILON,
            TargetUpdate.HARD_OR_SOFT, learn=("learning_rate", "double_q", "cql_alpha"), model=("dueling",),
        ),
        Algorithm(
            "c51", "rlpipe.policy.c51:C51Policy", ActionKind.DISCRETE, Exploration.EPSILON,
            TargetUpdate.HARD_OR_SOFT, learn=_DISTRIBUTIONAL_LEARN,
            model=(*_DISTRIBUTIONAL_MODEL, "num_atoms", "v_min", "v_max"), noisy_nets=True,
        ),
        Algorithm(
            "qrdqn", "rlpipe.policy.qrdqn:QRDQNPolicy", ActionKind.DISCRETE, Exploration.EPSILON,
            TargetUpdate.HARD_OR_SOFT, learn=(*_DISTRIBUTIONAL_LEARN, "kappa"),
            model=(*_DISTRIBUTIONAL_MODEL, "num_quantiles"), noisy_nets=True,
        ),
        Algorithm(
            "r2d2", "rlpipe.policy.r2d2:R2D2Policy", ActionKind.DISCRETE, Exploration.EPSILON,
            TargetUpdate.HARD_OR_SOFT, learn=("learning_rate", "double_q", "burn_in", "value_rescale",
                                              "priority_eta", "stored_state"),
            model=("dueling", "core", "core_hidden"), collect=("sequence_stride", "initial_priority"),
            sequences=True,
        ),
        Algorithm(
            "sac", "rlpipe.policy.sac:SACPolicy", ActionKind.CONTINUOUS, Exploration.SAMPLING,
            TargetUpdate.SOFT, learn=_SAC_LEARN, model=("obs_norm", "critic_layer_norm"),
        ),
        Algorithm(
            "td3", "rlpipe.policy.td3:TD3Policy", ActionKind.CONTINUOUS, Exploration.GAUSSIAN_NOISE,
            TargetUpdate.SOFT, learn=_TD3_LEARN, model=("obs_norm",),
        ),
        Algorithm(
            "ddpg", "rlpipe.policy.td3:DDPGPolicy", ActionKind.CONTINUOUS, Exploration.GAUSSIAN_NOISE,
            TargetUpdate.SOFT, learn=("learning_rate_actor", "learning_rate_q"), model=("obs_norm",),
        ),
        Algorithm(
            "td3_bc", "rlpipe.policy.td3_bc:TD3BCPolicy", ActionKind.CONTINUOUS, Exploration.GAUSSIAN_NOISE,
            TargetUpdate.SOFT, learn=(*_TD3_LEARN, "bc_alpha"), model=("obs_norm",),
        ),
        Algorithm(
            "iql", "rlpipe.policy.iql:IQLPolicy", ActionKind.CONTINUOUS, Exploration.SAMPLING,
            TargetUpdate.SOFT, learn=("learning_rate_actor", "learning_rate_q", "expectile", "temperature"),
            model=("obs_norm",),
        ),
        Algorithm(
            "cql", "rlpipe.policy.cql:CQLPolicy", ActionKind.CONTINUOUS, Exploration.SAMPLING,
            TargetUpdate.SOFT, learn=(*_SAC_LEARN, "cql_alpha", "cql_n_actions"),
            model=("obs_norm", "critic_layer_norm"),
        ),
        Algorithm(
            "bc", "rlpipe.policy.bc:BCPolicy", ActionKind.CONTINUOUS, Exploration.GAUSSIAN_NOISE,
            TargetUpdate.NONE, learn=("learning_rate_actor",), model=("obs_norm",), learns_from_rewards=False,
        ),
        Algorithm(
            "crossq", "rlpipe.policy.crossq:CrossQPolicy", ActionKind.CONTINUOUS, Exploration.SAMPLING,
            TargetUpdate.NONE, learn=(*_SAC_LEARN, "actor_update_freq"), model=("obs_norm",),
        ),
    )
}
"""Every ``policy.type`` and its row."""

if TYPE_CHECKING:
    PolicyType = str
else:
    PolicyType = Literal[tuple(ALGORITHMS)]
"""The values of ``policy.type``: the table's names (a ``Literal`` for pydantic and ``config show``)."""


def learning_rate_keys(policy_type: object) -> tuple[str, ...]:
    """The learning-rate keys ``policy_type`` reads (for hints); ``policy.learn.learning_rate``
    for a type outside the table (a seed-style config's)."""
    row = ALGORITHMS.get(policy_type) if isinstance(policy_type, str) else None
    return row.learning_rate_keys if row is not None else ("policy.learn.learning_rate",)
