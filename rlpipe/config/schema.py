"""Typed configuration, nested as in the seed (``cfg.policy.learn.batch_size`` ...).

Every model rejects unknown keys; each field carries a one-line description. Middleware
read only the attributes they need, so any nested attribute object with the same names
(an EasyDict, a SimpleNamespace) works in their place.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PlainSerializer,
    PlainValidator,
    PositiveFloat,
    PositiveInt,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError
from typing_extensions import TypeAliasType

from rlpipe.config.algorithms import (
    ALGORITHM_KEYS,
    ALGORITHM_SECTIONS,
    ALGORITHMS,
    ActionKind,
    Exploration,
    PolicyType,
    TargetUpdate,
)
from rlpipe.config.encoders import AUTO, check_encoder_name, encoder_names, is_import_path
from rlpipe.config.schedule import Schedule, ScheduleError, ScheduleType, as_schedule


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


EncoderName = Annotated[str, AfterValidator(check_encoder_name)]
"""A built-in encoder's name (:data:`rlpipe.config.encoders.ENCODERS`), ``auto``, or ``package.module:Class``."""


def check_encoder_kwargs(encoder: str, kwargs: dict[str, Any], section: str) -> None:
    """``encoder_kwargs`` are a user encoder's settings: a one-line error when they come with a built-in one."""
    if kwargs and not is_import_path(encoder):
        raise ValueError(f"{section}.encoder_kwargs are for a package.module:Class encoder; the built-in "
                         f"'{encoder}' takes its settings from {section}.encoder_hidden_size_list")


class WrapperConfig(_Strict):
    type: str = Field(description="A gymnasium.wrappers class name (FlattenObservation) or a dotted path.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the wrapper.")


class AtariConfig(_Strict):
    """The settings of an ALE game (``env.atari``, read for ``ALE/`` ids only); defaults as the ALE recommends."""

    repeat_action_probability: float = Field(
        0.25, ge=0, le=1, description="Sticky actions: the chance the ALE repeats the previous action each frame."
    )
    full_action_space: bool = Field(False, description="All 18 joystick actions instead of the game's own set.")
    noop_max: NonNegativeInt = Field(30, description="Most no-op frames at a game's start (random starts).")
    max_episode_steps: PositiveInt = Field(
        27_000, description="Agent steps (4 frames each) after which a game is truncated (108,000 frames)."
    )


class EnvConfig(_Strict):
    # ``import`` is a Python keyword: the field is ``import_``, read and written as ``import``
    model_config = ConfigDict(extra="forbid", validate_assignment=True, validate_by_name=True,
                              validate_by_alias=True, serialize_by_alias=True)

    env_id: str = Field(
        "CartPole-v1", description="Gymnasium environment id; 'my_pkg.envs:MyEnv-v0' imports my_pkg.envs first."
    )
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments for gym.make.")
    import_: list[str] = Field(
        default_factory=list, alias="import",
        description="Modules imported before gym.make (they register your environments).",
    )
    wrappers: list[WrapperConfig] = Field(
        default_factory=list, description="Gymnasium wrappers applied right after gym.make, innermost first."
    )
    collector_env_num: PositiveInt = Field(8, description="Environments stepped together by the collector.")
    evaluator_env_num: PositiveInt = Field(5, description="Environments stepped together by the evaluator.")
    n_evaluator_episode: PositiveInt = Field(10, description="Episodes per evaluation.")
    stop_value: float | None = Field(
        475.0, description="Evaluation figure (env.eval_metric) that solves the task: training stops there (with "
        "run.stop_on_solve) and reports count the env steps to it; None: no figure solves it (Atari, MinAtar).",
    )
    eval_metric: Literal["auto", "return", "success_rate"] = Field(
        "auto",
        description="The evaluation figure stop_value and summary.json use: the mean return, or the share of "
        "episodes with info['is_success']; auto: success_rate for goal envs (dict observations with a "
        "desired_goal) that report success, else return.",
    )
    max_episode_steps: PositiveInt | None = Field(None, description="Override of the env's time limit.")
    asynchronous: bool = Field(False, description="Run each environment in its own subprocess.")
    backend: Literal["gymnasium", "ale_vector"] = Field(
        "gymnasium", description="What steps the vector envs: gymnasium's vector envs, or for ALE games ale-py's "
        "C++ AtariVectorEnv (same observations; no wrappers, env_kwargs or subprocesses)."
    )
    atari: AtariConfig | None = Field(
        None, description="ALE games only (ALE/<Game>-v5): sticky actions, action set, no-ops, step limit; "
        "None: the ALE's defaults."
    )
    step_timeout: PositiveFloat | None = Field(
        None,
        description="Seconds a vector step or reset may take (needs env.asynchronous; default there 60); past "
        "it, or when a worker dies, the environments are restarted and their episodes end truncated.",
    )
    nonfinite: Literal["raise", "warn", "skip"] = Field(
        "raise",
        description="A NaN or infinity in a step's action, reward or observation: stop with one line (raise), "
        "log it (warn), or drop the step and end its episode (skip).",
    )


_POSITIVE_INT: TypeAdapter[int] = TypeAdapter(PositiveInt)


def _obs_shape(value: Any) -> int | tuple[int, ...]:
    """A vector's size (``4``, also written ``[4]``, as older configs and checkpoints have it) or a
    longer shape as a tuple."""
    try:
        sizes = [_POSITIVE_INT.validate_python(n) for n in (value if isinstance(value, (list, tuple)) else [value])]
    except ValidationError:
        sizes = []
    if not sizes:
        raise ValueError(f"must be a positive size or a list of positive sizes, got {value!r}")
    return sizes[0] if len(sizes) == 1 else tuple(sizes)


Shape = TypeAliasType("Shape", int | tuple[int, ...])
"""Named, so that ``rlpipe config show`` calls it a shape."""
ObsShape = Annotated[
    Shape,
    PlainValidator(_obs_shape),
    PlainSerializer(lambda shape: shape if isinstance(shape, int) else list(shape)),
]
"""An observation shape: the size of a vector (``4``), or a longer shape (``[84, 84, 4]``)."""


class ModelConfig(_Strict):
    obs_shape: ObsShape | None = Field(
        None, description="Observation shape: a vector's size (4) or a shape ([84, 84, 4]); None: taken from the env."
    )
    obs_dtype: Literal["uint8"] | None = Field(
        None, description="Dtype of image observations, which stay in it up to the encoder; None: not images "
        "(set from the env)."
    )
    obs_high: PositiveFloat | None = Field(
        None, description="Largest value of image observations, by which image encoders divide them (255 for "
        "Atari, 1 for MinAtar; set from the env)."
    )
    obs_categories: list[PositiveInt] | None = Field(
        None, description="Discrete or MultiDiscrete observations: the number of values of each dimension "
        "(Discrete(16): [16]), which the encoder one-hot encodes; None: not discrete (set from the env)."
    )
    encoder: EncoderName = Field(
        AUTO,
        description=f"The networks' first part, which reads the observations: one of {', '.join(encoder_names())} "
        "(auto chooses from the env's observation space: mlp for vectors, n-D Box flattened, MultiBinary, "
        "Discrete and MultiDiscrete one-hot, and dicts of them; for uint8 images [C, H, W] nature_cnn when H "
        "and W are >= 36 pixels, else minatar_cnn), or package.module:Class, an encoder of your own.",
    )
    encoder_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments of a package.module:Class encoder (its own settings; the built-in ones "
        "read encoder_hidden_size_list).",
    )
    action_shape: PositiveInt | None = Field(
        None, description="Number of actions (dqn) or action dimensions (sac, td3, ddpg, crossq); None: from the env."
    )
    encoder_hidden_size_list: list[PositiveInt] = Field(
        default_factory=lambda: [64, 64],
        description="Hidden layer sizes of the MLPs (dqn: the Q network; the others: the actor and each critic).",
    )
    dueling: bool = Field(False, description="Use a dueling (value + advantage) head.")
    num_atoms: int = Field(51, ge=2, description="Atoms of the categorical return distribution (c51).")
    v_min: float = Field(-10.0, description="Smallest atom of the return distribution (c51).")
    v_max: float = Field(10.0, description="Largest atom of the return distribution (c51).")
    num_quantiles: PositiveInt = Field(200, description="Quantiles of the return distribution (qrdqn).")
    noisy: bool = Field(
        False, description="Noisy (factorised Gaussian) head layers, which replace epsilon-greedy (c51, qrdqn)."
    )
    noisy_sigma0: float = Field(0.5, ge=0, description="Initial noise scale sigma0 of the noisy layers (c51, qrdqn).")
    noisy_encoder: bool = Field(
        False, description="With noisy: the encoder's fully connected layers are noisy too (the Nature CNN's "
        "512-unit layer, the MLP's hidden layers), as in Rainbow and DER (c51, qrdqn).",
    )
    critic_layer_norm: bool = Field(
        False, description="Layer-normalise each hidden layer of the critics (RLPD's critics; sac, cql).",
    )
    obs_norm: bool = Field(
        False, description="Normalise observations by running mean and std, clipped to +-5 (sac, td3, ddpg, crossq)."
    )
    core: Literal["none", "gru", "lstm"] = Field(
        "none", description="Recurrent core between the encoder and the head, the agent's memory (r2d2: gru or lstm)."
    )
    core_hidden: PositiveInt = Field(128, description="Units of the recurrent core (r2d2).")


def _learning_rate(value: Any) -> float | Schedule:
    """A learning rate: a positive number, or a schedule over env steps (a constant one is its number)."""
    try:
        schedule = as_schedule(value)
    except ScheduleError as err:
        raise ValueError(str(err)) from None
    if not (schedule.start > 0 and schedule.end >= 0):
        raise ValueError(f"a learning rate must be > 0 (a schedule's end >= 0), got {value!r}")
    return schedule.start if schedule.type == "constant" else schedule


LearningRate = Annotated[
    float | Schedule,
    PlainValidator(_learning_rate),
    PlainSerializer(lambda lr: lr if isinstance(lr, float) else str(lr)),
]
"""A learning rate: a number, or a schedule over env steps written as ``linear(3e-4, 1e-5)`` or
``{type: linear, start: 3e-4, end: 1e-5, decay: 50000}`` (:mod:`rlpipe.config.schedule`); saved
as the number or the string form."""
_LR_SCHEDULE = "; a number or a schedule over env steps, e.g. linear(3e-4, 1e-5) over run.max_env_step"

AdamBeta = Annotated[float, Field(ge=0, lt=1)]
Precision = Literal["fp32", "bf16-mixed"]
"""Values of ``policy.learn.precision`` (the policies check seed configs against the same)."""


class LearnConfig(_Strict):
    batch_size: PositiveInt = Field(64, description="Transitions per training batch.")
    update_per_collect: PositiveInt = Field(
        10, description="Gradient updates per pipeline iteration (or set replay_ratio instead)."
    )
    replay_ratio: PositiveFloat | None = Field(
        None,
        description="Gradient updates per env step; when set, it decides update_per_collect "
        "(= replay_ratio x collect.n_sample, at least 1), replacing any value given for it.",
    )
    learning_rate: LearningRate = Field(1e-3, description="Adam learning rate (dqn, c51, qrdqn)" + _LR_SCHEDULE + ".")
    learning_rate_actor: LearningRate = Field(
        3e-4, description="Adam learning rate of the actor (the actor-critics)" + _LR_SCHEDULE + "."
    )
    learning_rate_q: LearningRate = Field(
        3e-4, description="Adam learning rate of the critics (the actor-critics)" + _LR_SCHEDULE + "."
    )
    learning_rate_alpha: LearningRate = Field(
        3e-4, description="Adam learning rate of the temperature (sac, crossq)" + _LR_SCHEDULE + "."
    )
    alpha: float = Field(0.2, gt=0, description="Entropy temperature (sac, crossq): the initial one with auto_alpha.")
    auto_alpha: bool = Field(True, description="Learn the temperature toward target_entropy (sac, crossq).")
    target_entropy: float | None = Field(
        None, description="Entropy target of auto_alpha (sac, crossq); None: -action dims."
    )
    actor_update_freq: PositiveInt = Field(
        2, description="Actor (and target) updates every this many critic updates (td3, crossq; ddpg: every step)."
    )
    noise_sigma: float = Field(0.2, ge=0, description="Std of the target policy smoothing noise (td3).")
    noise_clip: float = Field(0.5, ge=0, description="Target policy smoothing noise is clipped to +-this (td3).")
    target_update_freq: PositiveInt | None = Field(
        100, description="Hard target update every this many train iterations (dqn); null when target_theta is used."
    )
    target_theta: float | None = Field(
        None, gt=0, le=1, description="Soft (Polyak) target update rate; when set, replaces hard updates."
    )
    reward_scale: PositiveFloat = Field(
        1.0, description="Factor on the rewards the losses learn from (data and reported returns stay as the env "
        "gave them): brings tiny rewards (POPGym's sum to 1 per episode) to the scale Adam and value rescaling suit.",
    )
    grad_clip: float | None = Field(10.0, gt=0, description="Max gradient norm; None disables clipping.")
    precision: Precision = Field(
        "fp32",
        description="Arithmetic of the updates: bf16-mixed runs the matrix products and convolutions in "
        "bfloat16 under torch.autocast (weights, optimizers, Q-values and losses stay float32); about 1.3-2x "
        "faster products where the CPU has bf16 instructions (AVX512-BF16, AMX) or on a GPU that has them.",
    )
    adam_betas: tuple[AdamBeta, AdamBeta] = Field(
        (0.9, 0.999), description="Adam's (beta1, beta2), each in [0, 1); CrossQ's paper uses [0.5, 0.999]."
    )
    double_q: bool = Field(
        True, description="Double DQN target: online argmax, target evaluation (dqn, c51, qrdqn)."
    )
    adam_eps: float = Field(1e-8, gt=0, description="Adam's epsilon (c51, qrdqn; DER uses 1.5e-4).")
    kappa: float = Field(1.0, ge=0, description="Threshold of the quantile Huber loss; 0: plain quantile loss (qrdqn).")
    cql_alpha: float = Field(
        0.0, ge=0, description="Weight of CQL's conservative penalty: positive for cql; for dqn, c51 and qrdqn "
        "discrete CQL (0: off).",
    )
    cql_n_actions: PositiveInt = Field(
        10, description="Actions sampled per state for each of CQL's three proposals (uniform, pi(s), pi(s')) (cql)."
    )
    bc_alpha: float = Field(2.5, gt=0, description="Weight of the Q term against behaviour cloning (td3_bc).")
    expectile: float = Field(0.7, gt=0, lt=1, description="Expectile of the value function (iql).")
    temperature: float = Field(3.0, gt=0, description="Inverse temperature of advantage-weighted regression (iql).")
    burn_in: NonNegativeInt = Field(
        0, description="First steps of each sequence that only warm the recurrent state up, without gradient "
        "(r2d2; DRQN: 0)."
    )
    value_rescale: bool = Field(
        True, description="Learn on h(x) = sign(x)(sqrt(|x| + 1) - 1) + 0.001x of the returns, R2D2's value "
        "rescaling, instead of reward clipping (r2d2)."
    )
    priority_eta: float = Field(
        0.9, ge=0, le=1, description="A sequence's priority: eta x max + (1 - eta) x mean of its TD errors (r2d2)."
    )
    stored_state: bool = Field(
        True, description="Start each sequence from the recurrent state its collector had (R2D2); false: from "
        "zeros (DRQN) (r2d2)."
    )

    @model_validator(mode="before")
    @classmethod
    def _soft_replaces_default_hard(cls, data: Any) -> Any:
        """Giving only ``target_theta`` switches to soft updates (the hard default steps aside)."""
        if isinstance(data, dict) and data.get("target_theta") is not None and "target_update_freq" not in data:
            return {**data, "target_update_freq": None}
        return data


class CollectConfig(_Strict):
    n_sample: PositiveInt | None = Field(96, description="Env steps collected per iteration (step collector).")
    n_episode: PositiveInt | None = Field(None, description="Episodes collected per iteration (episode collector).")
    unroll_len: PositiveInt = Field(
        1, description="Length of sampled sequences (1: single transitions; r2d2: burn-in and learning steps)."
    )
    sequence_stride: PositiveInt | None = Field(
        None, description="Steps between the starts of two stored sequences of an episode (r2d2); None: half "
        "of unroll_len (R2D2's sequences overlap by half)."
    )
    initial_priority: bool = Field(
        False, description="Collectors estimate each step's TD error with their own network, and a new sequence "
        "enters priority replay at R2D2's eta mix of them (Ape-X's actor-side priorities) instead of at the "
        "largest priority seen (r2d2, with policy.priority)."
    )
    noise_sigma: float = Field(
        0.1, ge=0, description="Std of the Gaussian exploration noise on [-1, 1] actions (td3, ddpg)."
    )


class EvaluatorConfig(_Strict):
    """When to evaluate: every ``eval_freq`` train iterations (gradient updates), or each time the
    env-step count crosses a multiple of ``eval_every_env_steps``; one of the two."""

    eval_freq: PositiveInt | None = Field(
        1000, description="Evaluate every this many train iterations (gradient updates); null when "
        "eval_every_env_steps is used."
    )
    eval_every_env_steps: PositiveInt | None = Field(
        None, description="Evaluate each time the env-step count crosses a multiple of this (as SB3's eval_freq "
        "counts); when set, replaces eval_freq."
    )

    @model_validator(mode="before")
    @classmethod
    def _env_steps_replace_default_iterations(cls, data: Any) -> Any:
        """Giving only ``eval_every_env_steps`` switches to env steps (the default ``eval_freq`` steps aside)."""
        if isinstance(data, dict) and data.get("eval_every_env_steps") is not None and "eval_freq" not in data:
            return {**data, "eval_freq": None}
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> EvaluatorConfig:
        if (self.eval_freq is None) == (self.eval_every_env_steps is None):
            raise _one_line("config key 'policy.eval.evaluator': use exactly one of eval_freq (train iterations) "
                            "and eval_every_env_steps (env steps); set the other to null")
        return self


class EvalConfig(_Strict):
    evaluator: EvaluatorConfig = Field(default_factory=EvaluatorConfig)
    eps: float = Field(
        0.0, ge=0, le=1, description="Epsilon of evaluation (DQN family): a uniformly random action with this "
        "probability, from a stream seeded apart from training's. 0: greedy."
    )


class EpsConfig(_Strict):
    """Epsilon's schedule over env steps, written as a mapping of these keys, a number (a constant)
    or a string (``linear(1.0, 0.05, 10000)``), as learning rates are (:mod:`rlpipe.config.schedule`)."""

    type: ScheduleType = Field("exp", description="Schedule of epsilon over env steps.")
    start: float = Field(1.0, ge=0, le=1, description="Epsilon at env step 0 (a constant's value).")
    end: float = Field(0.05, ge=0, le=1, description="Final epsilon.")
    decay: PositiveInt | None = Field(
        10000, description="Env steps of the decay (linear) or its time constant (exp); null: run.max_env_step."
    )

    @model_validator(mode="before")
    @classmethod
    def _from_number_or_text(cls, data: Any) -> Any:
        """A number or a string form stands for the mapping it describes."""
        if isinstance(data, (int, float, str)) and not isinstance(data, bool):
            try:
                schedule = as_schedule(data)
            except ScheduleError as err:
                raise ValueError(str(err)) from None
            return {"type": schedule.type, "start": schedule.start, "end": schedule.end, "decay": schedule.decay}
        return data

    @property
    def schedule(self) -> Schedule:
        """The schedule these keys describe (a constant's ``end`` is its ``start``)."""
        end = self.start if self.type == "constant" else self.end
        return Schedule(self.type, self.start, end, self.decay)


class ReplayBufferConfig(_Strict):
    replay_buffer_size: PositiveInt = Field(100_000, description="Capacity in transitions (or episodes).")
    frame_store: Literal["auto"] | bool = Field(
        "auto", description="Keep each frame of stacked-frame observations once and rebuild the stacks when "
        "sampled (about 7 KB per Atari transition, not 56 KB); auto: on for ALE games' frame stacks."
    )
    priority_power_factor: float = Field(0.6, ge=0, description="Priority exponent alpha.")
    IS_weight_power_factor: float = Field(0.4, ge=0, le=1, description="Initial importance-weight exponent beta.")
    IS_weight_anneal_train_iter: PositiveInt = Field(
        100_000, description="Train iterations over which beta anneals to 1 (r2d2 keeps beta fixed, as its paper)."
    )


class HerConfig(_Strict):
    her_strategy: Literal["final", "future", "episode"] = Field("future", description="Where new goals come from.")
    her_replay_k: PositiveInt = Field(1, description="Relabelled copies per sampled transition.")
    episode_size: PositiveInt | None = Field(None, description="Episodes sampled per batch; None: batch_size.")
    sample_per_episode: PositiveInt | None = Field(None, description="Transitions per episode; None: all.")
    relabel_prob: float = Field(
        1.0, ge=0, le=1, description="Share of sampled transitions given a hindsight goal; the rest keep theirs."
    )


class OtherConfig(_Strict):
    eps: EpsConfig = Field(default_factory=EpsConfig)
    replay_buffer: ReplayBufferConfig = Field(default_factory=ReplayBufferConfig)
    her: HerConfig | None = Field(None, description="Hindsight experience replay; None disables it.")


ONE_LINE_ERROR = "rlpipe_config"
"""Type of the validation errors whose message is the whole line, key path included."""


def _one_line(message: str) -> PydanticCustomError:
    return PydanticCustomError(ONE_LINE_ERROR, message)


class PolicyConfig(_Strict):
    type: PolicyType = Field(
        "dqn",
        description="Algorithm: " + ", ".join(f"{row.name} ({row.action_kind.value} actions)"
                                              for row in ALGORITHMS.values()) + ".",
    )
    cuda: bool = Field(False, description="Train on the GPU when available.")
    priority: bool = Field(False, description="Prioritised replay: the learner returns per-sample priorities.")
    priority_IS_weight: bool = Field(False, description="Correct prioritised sampling with importance weights.")
    discount_factor: float = Field(0.99, gt=0, le=1, description="Discount gamma.")
    nstep: PositiveInt = Field(1, description="Steps of the n-step return.")
    random_collect_size: int = Field(
        0, ge=0,
        description="Env steps collected before training, acting as warm_up_actions says (by default at random).",
    )
    warm_up_actions: Literal["random", "policy"] = Field(
        "random",
        description="How the random_collect_size warm-up acts: uniformly random actions, or the collect policy "
                    "(Dopamine's agents with noisy nets, whose exploration is the noise from the first step).",
    )
    model: ModelConfig = Field(default_factory=ModelConfig)
    learn: LearnConfig = Field(default_factory=LearnConfig)
    collect: CollectConfig = Field(default_factory=CollectConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    other: OtherConfig = Field(default_factory=OtherConfig)

    def _section(self, path: str) -> BaseModel:
        """The section at dotted ``path`` (under ``policy.``)."""
        section: BaseModel = self
        for part in path.split("."):
            section = getattr(section, part)
        return section

    def _given_keys(self) -> Iterator[str]:
        """The algorithm-dependent keys (under ``policy.``: those of :data:`ALGORITHM_SECTIONS` and
        :data:`ALGORITHM_KEYS`) that were set to a value that matters: not None and not the
        default (either changes nothing)."""
        in_sections = [f"{path}.{name}" for path in ALGORITHM_SECTIONS
                       for name in type(self._section(path)).model_fields]
        for key in (*in_sections, *ALGORITHM_KEYS):
            path, _, name = key.rpartition(".")
            section = self._section(path)
            value = getattr(section, name)
            if (name in section.model_fields_set and value is not None
                    and value != type(section).model_fields[name].get_default(call_default_factory=True)):
                yield key

    @model_validator(mode="after")
    def _algorithm_reads_its_keys(self) -> PolicyConfig:
        """A key given (by a preset, a file, a dict or an override) that the algorithm does not
        read is an error naming the key to use instead. Keys at None or their default pass, so
        a saved config, which lists every key, loads back."""
        row = ALGORITHMS[self.type]
        exploration = row.exploration_of(self)
        keys = row.keys_for(exploration)
        unread = next((key for key in self._given_keys() if key not in keys), None)
        if unread is not None:
            raise _one_line(row.unread_key_error(unread, exploration))
        if "model.v_min" in keys and not self.model.v_min < self.model.v_max:
            raise _one_line(f"config key 'policy.model.v_min' ({self.model.v_min}) must be below policy.model.v_max "
                            f"({self.model.v_max})")
        learn = self.learn
        if row.target_update is TargetUpdate.HARD_OR_SOFT and (learn.target_theta is None) == (
                learn.target_update_freq is None):
            raise _one_line("config key 'policy.learn': use exactly one target update: target_update_freq (hard) "
                            "or target_theta (soft); set the other to null")
        if row.target_update is TargetUpdate.SOFT and learn.target_theta is None:
            raise _one_line(f"config key 'policy.learn.target_theta' must be set: policy.type '{self.type}' uses "
                            "soft target updates (e.g. 0.005)")
        return self


class RunConfig(_Strict):
    max_env_step: PositiveInt = Field(100_000, description="Stop after this many env steps.")
    max_train_iter: PositiveInt | None = Field(None, description="Stop after this many train iterations.")
    save_freq: PositiveInt = Field(1000, description="Checkpoint every this many train iterations.")
    keep_checkpoints: PositiveInt | None = Field(
        None, description="Keep only this many periodic checkpoints, the newest (None: keep all)."
    )
    log_freq: PositiveInt = Field(100, description="Write training metrics every this many train iterations.")
    progress: bool = Field(True, description="Show a progress bar.")
    torch_threads: PositiveInt = Field(
        1, description="Threads torch may use; small networks run fastest on one (no thread contention)."
    )
    flush_denormal: bool = Field(
        True,
        description="Compute subnormal floats (below 1.2e-38) as zero on the CPU (torch.set_flush_denormal): "
                    "Adam's moments of weights that stop getting gradients decay into that range, where "
                    "x86 arithmetic is several times slower. For the run only: the caller's setting is back "
                    "afterwards.",
    )
    stop_on_solve: bool = Field(True, description="Stop once the evaluation figure reaches env.stop_value.")


class RewardModelConfig(_Strict):
    type: Literal["rnd", "icm"] = Field(
        ...,
        description="Learned exploration bonus: rnd (random network distillation), icm (curiosity; discrete actions).",
    )
    intrinsic_reward_weight: float = Field(
        1.0,
        ge=0,
        description="Training reward = extrinsic + weight x intrinsic (the intrinsic one scaled by its running std).",
    )
    learning_rate: float = Field(1e-3, gt=0, description="Adam learning rate of the reward model.")
    batch_size: PositiveInt = Field(
        64, description="Transitions per reward-model update, sampled from the replay buffer."
    )
    update_per_collect: PositiveInt = Field(1, description="Reward-model updates per pipeline iteration.")
    obs_norm: bool = Field(True, description="Normalise its observations with running mean and std (clipped to +-5).")
    encoder_hidden_size_list: list[PositiveInt] = Field(
        default_factory=lambda: [64, 64], description="Hidden layer sizes of the reward model's networks."
    )
    encoder: EncoderName = Field(
        AUTO, description="The first part of the reward model's networks: as policy.model.encoder (auto: from the "
        "observation space).",
    )
    encoder_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of a package.module:Class reward_model.encoder.",
    )

    @model_validator(mode="after")
    def _kwargs_need_a_class(self) -> RewardModelConfig:
        check_encoder_kwargs(self.encoder, self.encoder_kwargs, "reward_model")
        return self
    feature_size: PositiveInt = Field(64, description="Output size of RND's networks and of ICM's encoder.")


class OfflineConfig(_Strict):
    """Learning from a dataset (``rlpipe dataset``): offline only, or offline-to-online with the dataset
    kept as a second buffer beside the online one (the seed's ``[(dataset, r), (online, 1 - r)]``)."""

    dataset: str = Field(
        ..., description="A dataset directory (rlpipe dataset ...), a Minari dataset's directory, or minari:ID for "
        "one in Minari's local store (MINARI_DATASETS_PATH).",
    )
    dataset_share: float = Field(
        1.0, gt=0, le=1, description="Share of each batch drawn from the dataset. 1: offline only (no env steps, "
        "the run stops at run.max_train_iter); below 1: offline-to-online, the rest from the online buffer "
        "(RLPD's symmetric sampling: 0.5).",
    )
    pretrain_iter: NonNegativeInt = Field(
        0, description="Updates on the dataset alone before the first env step (offline-to-online; IQL fine-tuning).",
    )
    return_range: PositiveFloat | None = Field(
        None, description="Scale the rewards the losses learn from so that the dataset's whole episodes' returns "
        "span this range: policy.learn.reward_scale = return_range / (max return - min return), filled in when "
        "the run starts (IQL's locomotion normalisation: 1000). None: rewards as policy.learn.reward_scale says.",
    )
    seal: str | None = Field(
        None, description="The dataset's seal, filled in when the run starts, so a resumed run refuses other data.",
    )

    @property
    def online(self) -> bool:
        """Whether the run also collects (offline-to-online)."""
        return self.dataset_share < 1.0


class DistributedConfig(_Strict):
    """Where the pipeline runs: one process (``local``) or collector actors on Ray feeding this process's learner."""

    backend: Literal["local", "ray"] = Field(
        "local", description="local: one process; ray: collector actors on Ray (the 'ray' extra) feed the learner."
    )
    collectors: PositiveInt = Field(1, description="Collector actors (ray), each with env.collector_env_num envs.")
    address: str | None = Field(
        None, description="Address of a running Ray cluster (ray start --head); None: start one on this machine."
    )
    sync_every: PositiveInt = Field(
        400, description="Collectors get the learner's newest weights about every this many of their own env steps."
    )
    max_in_flight: PositiveInt = Field(2, description="Fragments a collector may have outstanding (back-pressure).")
    epsilon_ladder: bool = Field(
        False, description="Collector i of N explores with its own fixed epsilon 0.4^(1 + 7i/(N - 1)) (Ape-X's "
        "ladder; one collector: 0.4) in place of the epsilon schedule (algorithms exploring epsilon-greedily)."
    )
    max_restarts: int = Field(
        10, ge=-1, description="Times Ray restarts a collector actor whose process died (-1: without limit)."
    )
    object_store_mb: PositiveInt = Field(
        512, description="Cap of Ray's object store in MiB when rlpipe starts the cluster itself."
    )


class Config(_Strict):
    """The whole experiment."""

    exp_name: str = Field("default", description="Name of the experiment (and default run directory).")
    description: str = Field("", description="One line saying what the run is (rlpipe presets shows it).")
    seed: int = Field(0, ge=0, lt=2**32, description="Seed of envs, networks and sampling (0 to 2**32 - 1).")
    env: EnvConfig = Field(default_factory=EnvConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    reward_model: RewardModelConfig | None = Field(
        None, description="A learned intrinsic reward (RND, ICM) mixed into the training batches; None: off."
    )
    offline: OfflineConfig | None = Field(
        None, description="Learn from a dataset, offline only or offline-to-online; None: online only.",
    )
    run: RunConfig = Field(default_factory=RunConfig)
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)

    @property
    def env_steps_per_collect(self) -> int | None:
        """Env steps one step collection takes: ``policy.collect.n_sample`` rounded up to whole
        vector steps of ``env.collector_env_num`` (None for episode collection, and offline only)."""
        n_sample = self.policy.collect.n_sample
        if n_sample is None or self.policy.other.her is not None or self.offline_only:
            return None
        num_envs = self.env.collector_env_num
        return -(-n_sample // num_envs) * num_envs

    @property
    def offline_only(self) -> bool:
        """Whether the run learns from a dataset alone (``offline`` with ``dataset_share`` 1: no env steps)."""
        return self.offline is not None and not self.offline.online

    @property
    def updates_per_env_step(self) -> float | None:
        """Gradient updates per collected env step, the replay ratio (None for episode collection)."""
        steps = self.env_steps_per_collect
        return None if steps is None else self.policy.learn.update_per_collect / steps

    @model_validator(mode="after")
    def _replay_ratio_sets_updates(self) -> Config:
        """``policy.learn.replay_ratio`` is the one-number way to set ``update_per_collect``.

        It replaces a preset's ``update_per_collect`` (so that ``policy.learn.replay_ratio=1``
        on the command line means what it says) and counts the env steps a collection really
        takes (whole vector steps); ``rlpipe train`` prints the resulting numbers.
        """
        learn = self.policy.learn
        if learn.replay_ratio is None:
            return self
        if self.offline_only:
            raise _one_line("config key 'policy.learn.replay_ratio': an offline run takes no env steps; set it to "
                             "null and give policy.learn.update_per_collect (updates per iteration)")
        steps = self.env_steps_per_collect
        if steps is None:
            raise ValueError("policy.learn.replay_ratio needs step collection (policy.collect.n_sample, no HER)")
        learn.update_per_collect = max(1, round(learn.replay_ratio * steps))
        return self

    @model_validator(mode="after")
    def _settings_work_together(self) -> Config:
        """Reject combinations that would crash mid-run or be silently ignored."""
        policy = self.policy
        if policy.other.her is not None:
            if policy.collect.n_episode is None:
                raise ValueError("policy.other.her needs policy.collect.n_episode (HER collects whole episodes)")
            if policy.nstep > 1:
                raise ValueError("policy.other.her needs policy.nstep=1 (relabelled episodes carry no n-step returns)")
            if policy.priority:
                raise ValueError("policy.priority is not supported together with policy.other.her")
            if self.reward_model is not None:
                raise ValueError("reward_model is not supported together with policy.other.her")
        elif policy.collect.n_sample is None:
            raise ValueError("policy.collect.n_sample must be set (env steps collected per iteration)")
        elif policy.other.replay_buffer.replay_buffer_size < policy.learn.batch_size:
            raise ValueError(
                f"policy.other.replay_buffer.replay_buffer_size ({policy.other.replay_buffer.replay_buffer_size}) "
                f"is smaller than policy.learn.batch_size ({policy.learn.batch_size}): training could never start"
            )
        if policy.model.noisy_encoder and not policy.model.noisy:
            raise ValueError("policy.model.noisy_encoder needs policy.model.noisy=true (the head's noisy layers)")
        check_encoder_kwargs(policy.model.encoder, policy.model.encoder_kwargs, "policy.model")
        if ALGORITHMS[policy.type].sequences:
            self._check_sequences()
        elif policy.collect.unroll_len > 1:
            raise ValueError(
                f"policy.collect.unroll_len > 1 needs a sequence policy; '{policy.type}' trains on single steps"
            )
        continuous = ALGORITHMS[policy.type].action_kind is ActionKind.CONTINUOUS
        if self.reward_model is not None and self.reward_model.type == "icm" and continuous:
            raise ValueError(
                f"reward_model.type 'icm' needs discrete actions; policy.type '{policy.type}' has continuous ones "
                "(use reward_model.type=rnd)"
            )
        if policy.random_collect_size > self.run.max_env_step:
            raise ValueError(
                f"policy.random_collect_size ({policy.random_collect_size}) is larger than run.max_env_step "
                f"({self.run.max_env_step}): the run would end inside its warm-up"
            )
        if policy.priority_IS_weight and not policy.priority:
            raise ValueError("policy.priority_IS_weight needs policy.priority=true")
        if self.distributed.epsilon_ladder and (
                self.distributed.backend == "local"
                or ALGORITHMS[policy.type].exploration_of(policy) is not Exploration.EPSILON):
            raise _one_line("config key 'distributed.epsilon_ladder' needs collectors on Ray (distributed.backend="
                             f"ray) and an algorithm exploring epsilon-greedily; policy.type '{policy.type}' with "
                             f"distributed.backend '{self.distributed.backend}' has no use for it")
        if self.distributed.backend == "ray" and policy.other.her is not None:
            raise ValueError("distributed.backend 'ray' collects single steps; HER's episode collection runs "
                             "with distributed.backend=local")
        if self.offline is not None:
            self._check_offline(self.offline)
        if self.env.step_timeout is not None and not self.env.asynchronous:
            raise ValueError("env.step_timeout needs env.asynchronous=true (only a subprocess can be stopped)")
        return self

    def _check_sequences(self) -> None:
        """What a recurrent policy needs: a core, sequences longer than their burn-in, a stride that
        leaves no step out, and the parts that know sequences (online, no HER, no learned reward,
        step collection)."""
        policy = self.policy
        collect, learn = policy.collect, policy.learn
        if policy.model.core == "none":
            raise _one_line(f"config key 'policy.model.core': policy.type '{policy.type}' needs a recurrent core "
                             "(gru or lstm)")
        if collect.unroll_len <= learn.burn_in:
            raise _one_line(f"config key 'policy.collect.unroll_len' ({collect.unroll_len}) must exceed "
                             f"policy.learn.burn_in ({learn.burn_in}): a sequence needs steps to learn from")
        if collect.sequence_stride is not None and collect.sequence_stride > collect.unroll_len:
            raise _one_line(f"config key 'policy.collect.sequence_stride' ({collect.sequence_stride}) is longer "
                             f"than a sequence (policy.collect.unroll_len {collect.unroll_len}): steps between "
                             "sequences would never be learned from")
        anneal = ReplayBufferConfig.model_fields["IS_weight_anneal_train_iter"].default
        if policy.other.replay_buffer.IS_weight_anneal_train_iter != anneal:  # a saved config lists the default
            raise _one_line(f"config key 'policy.other.replay_buffer.IS_weight_anneal_train_iter' is not read by "
                             f"policy.type '{policy.type}': its importance weights keep the fixed exponent "
                             "IS_weight_power_factor (R2D2's 0.6)")
        if collect.initial_priority and not policy.priority:
            raise _one_line("config key 'policy.collect.initial_priority' needs policy.priority: true (it sets the "
                             "priorities new sequences enter priority replay with)")
        for key, value, why in (
            ("policy.other.her", policy.other.her, "HER relabels single steps"),
            ("reward_model", self.reward_model, "learned rewards are computed on single steps"),
            ("offline", self.offline, "datasets hold single steps"),
            ("policy.collect.n_episode", collect.n_episode, "it collects steps (policy.collect.n_sample)"),
        ):
            if value is not None:
                raise _one_line(f"config key '{key}' cannot be used with policy.type '{policy.type}': {why}")

    def _check_whole_iterations(self, key: str, updates: int, what: str) -> None:
        """Refuse an update count the learner cannot stop at: it runs ``policy.learn.update_per_collect``
        updates an iteration, so any other count would be overshot to the next multiple unsaid."""
        per_iteration = self.policy.learn.update_per_collect
        if updates % per_iteration:
            above = -(-updates // per_iteration) * per_iteration
            raise _one_line(f"config key '{key}' ({updates}) must be a multiple of policy.learn.update_per_collect "
                            f"({per_iteration}): {what} only between iterations of that many updates, so it would "
                            f"stop at {above}")

    def _check_offline(self, offline: OfflineConfig) -> None:
        """What learning from a dataset needs: one-step transitions, no HER or learned reward, pretraining
        in whole learner iterations, and (offline only) a stop in whole learner iterations, evaluations
        counted in updates, uniform sampling, this process."""
        policy = self.policy
        if policy.nstep != 1:
            raise _one_line(f"config key 'offline.dataset' needs policy.nstep=1: a dataset holds one-step "
                             f"transitions (policy.nstep is {policy.nstep})")
        if policy.other.her is not None or self.reward_model is not None:
            raise _one_line("config key 'offline.dataset' cannot be combined with policy.other.her or reward_model")
        if offline.online:
            self._check_whole_iterations("offline.pretrain_iter", offline.pretrain_iter, "pretraining ends")
            return
        if offline.pretrain_iter:
            raise _one_line("config key 'offline.pretrain_iter' needs offline.dataset_share below 1 (offline-to-"
                             "online); an offline run trains on the dataset alone throughout")
        if self.run.max_train_iter is None:
            raise _one_line("config key 'run.max_train_iter' must be set: an offline run (offline.dataset_share=1) "
                             "takes no env steps, so it stops after that many updates")
        self._check_whole_iterations("run.max_train_iter", self.run.max_train_iter, "an offline run stops")
        if policy.eval.evaluator.eval_every_env_steps is not None:
            raise _one_line("config key 'policy.eval.evaluator.eval_every_env_steps': an offline run takes no env "
                             "steps; evaluate every policy.eval.evaluator.eval_freq updates")
        if policy.priority:
            raise _one_line("config key 'policy.priority': a dataset is sampled uniformly (priority replay needs an "
                             "online buffer, offline.dataset_share below 1)")
        if self.distributed.backend != "local":
            raise _one_line("config key 'distributed.backend': an offline run collects nothing; use local")
