"""Encoders: the first part of every network, chosen from the observation space.

An encoder takes observations as they travel (on the policy's device, in the dtype the
environment gave them) and returns float32 features ``[B, n_features]``. It owns the
conversion to float: an observation stays in its own dtype (a future ``uint8`` image
stays ``uint8``) until the encoder of the network that reads it.

:func:`make_encoder` picks the encoder from the observation space and the config key
``policy.model.encoder`` (``auto`` chooses from the space), built-in ones by the table of
encoders (:data:`rlpipe.config.encoders.ENCODERS`, the single source of their names):

- ``mlp``: ``Linear -> ReLU`` per entry of ``encoder_hidden_size_list``, on float features made
  from the space (:func:`flat_size`): a ``Box`` of any shape flattened, a ``MultiBinary`` as its
  0/1 vector, a ``Discrete`` one-hot, a ``MultiDiscrete`` one-hot per dimension (as
  Stable-Baselines3 does), a ``Dict`` of these concatenated entry by entry (goal dicts in the
  layout of ``rlpipe.envs.FlattenGoalObservation``);
- ``nature_cnn`` and ``minatar_cnn`` (:mod:`rlpipe.model.cnn`): the DQN networks of Atari and of
  MinAtar on channels-first images ``[C, H, W]``, scaled by the space's ``high`` (their dense
  layer is the paper's: ``encoder_hidden_size_list`` is not read);
- ``package.module:Class``: a user's encoder, ``Class(observation_space, **encoder_kwargs)``, an
  ``nn.Module`` with an ``n_features`` attribute, that takes the observations in their own dtype
  (a dict of them for a ``Dict`` space) and returns float32 ``[B, n_features]``.

An image is a channels-first 3-D ``Box`` of an integer dtype (:func:`is_image`); ``auto`` gives it ``nature_cnn`` when
both sides are at least 36 pixels (84x84 Atari stacks), else ``minatar_cnn`` (10x10 MinAtar
channels). A kind that cannot read a space (``mlp`` on images, a CNN on a flat ``Box`` or
``nature_cnn`` on 10x10) is a one-line error naming ``policy.model.encoder`` and the space.

Every encoder is an ``nn.Sequential`` of its layers with a :meth:`Encoder.prepare` step in
front, so the layers' state-dict names are those of a plain ``nn.Sequential`` and a network
may append its output layer to the encoder (RND, ICM).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlpipe.config.encoders import AUTO, ENCODERS, check_encoder_name, is_import_path
from rlpipe.errors import first_line
from rlpipe.model.batch_renorm import BatchRenorm
from rlpipe.model.cnn import (
    MINATAR_MIN_SIZE,
    NATURE_MIN_SIZE,
    PatchConv2d,
    image_scale,
    minatar_cnn_layers,
    nature_cnn_layers,
)
from rlpipe.utils.imports import ImportPathError, import_object

GOAL_LAYOUT = ("observation", "achieved_goal", "desired_goal")
"""The order in which a goal dict's entries are concatenated: the flat layout the goal envs use
(``rlpipe.envs.goal.GOAL_KEYS``), so a dict and its flattened vector give the same features."""

ObsShape = int | Sequence[int]
"""An observation shape as configs write it: ``4`` or ``(4,)`` for a vector, ``(84, 84, 4)`` for a stack."""


@dataclass(frozen=True)
class EncoderConfig:
    """The encoder settings of ``policy.model``, for networks built from explicit arguments.

    :func:`make_encoder` also takes ``policy.model`` itself (or any object with these names;
    ``encoder``, ``batch_renorm`` and ``encoder_kwargs`` may be absent, as in the seed's configs).
    """

    encoder_hidden_size_list: Sequence[int] = (64, 64)
    encoder: str = AUTO
    batch_renorm: bool = False
    """Batch-renormalise the input and each hidden layer's output (CrossQ's placement)."""
    encoder_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of a ``package.module:Class`` encoder."""


class Encoder(nn.Sequential):
    """Layers behind a :meth:`prepare` step that turns observations into a float32 ``[B, F]`` tensor."""

    def prepare(self, obs: Any) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, obs: Any) -> torch.Tensor:
        h = self.prepare(obs)
        for layer in self:  # inline Sequential.forward: one module call less per batch
            h = layer(h)
        return h


class MlpEncoder(Encoder):
    """A ``Box`` observation of ``shape``, as float32, flattened when it has more than one axis."""

    def __init__(self, shape: tuple[int, ...], layers: Sequence[nn.Module]) -> None:
        super().__init__(*layers)
        self.shape = shape

    def prepare(self, obs: torch.Tensor) -> torch.Tensor:
        n = len(self.shape)
        if tuple(obs.shape[-n:]) != self.shape:
            size = self.shape[0] if n == 1 else self.shape
            raise ValueError(f"model expects observations of size {size}, got shape {tuple(obs.shape)}")
        obs = obs.to(torch.float32)
        return obs if n == 1 else obs.reshape(*obs.shape[:-n], prod(self.shape))


def one_hot(obs: torch.Tensor, nvec: Sequence[int]) -> torch.Tensor:
    """Integer observations of ``len(nvec)`` values each (``[B]`` for one, ``[B, *shape]`` for more)
    as float32 ``[B, sum(nvec)]``: value ``v`` of dimension ``i`` sets feature ``sum(nvec[:i]) + v``."""
    values = obs.reshape(-1, len(nvec)).long()
    if len(nvec) == 1:
        return nn.functional.one_hot(values[:, 0], nvec[0]).to(torch.float32)
    return torch.cat([nn.functional.one_hot(values[:, i], n) for i, n in enumerate(nvec)], dim=1).to(torch.float32)


def categories(space: spaces.Space[Any]) -> tuple[int, ...] | None:
    """The number of values of each dimension of a ``Discrete`` or ``MultiDiscrete`` space (None for others)."""
    if isinstance(space, spaces.Discrete):
        return (int(space.n),)
    if isinstance(space, spaces.MultiDiscrete):
        return tuple(int(n) for n in np.asarray(space.nvec).reshape(-1))
    return None


class OneHotEncoder(Encoder):
    """A ``Discrete`` or ``MultiDiscrete`` observation, one-hot per dimension (:func:`one_hot`)."""

    def __init__(self, nvec: Sequence[int], layers: Sequence[nn.Module]) -> None:
        super().__init__(*layers)
        self.nvec = tuple(nvec)

    def prepare(self, obs: torch.Tensor) -> torch.Tensor:
        return one_hot(obs, self.nvec)


def _entry_features(space: spaces.Space[Any], obs: torch.Tensor) -> torch.Tensor:
    """One entry of a dict observation ``[B, ...]`` as float32 ``[B, flat_size(space)]``."""
    nvec = categories(space)
    return one_hot(obs, nvec) if nvec is not None else obs.to(torch.float32).flatten(start_dim=1)


class DictEncoder(Encoder):
    """A ``Dict`` observation: each entry as float32 features (flattened, or one-hot for ``Discrete``
    and ``MultiDiscrete`` entries) concatenated in ``keys`` order."""

    def __init__(self, entries: Mapping[str, spaces.Space[Any]], layers: Sequence[nn.Module]) -> None:
        super().__init__(*layers)
        self.entries = dict(entries)
        self.keys = tuple(entries)

    def prepare(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        missing = [key for key in self.keys if key not in obs]
        if missing:
            raise ValueError(f"model expects dict observations with keys {self.keys}, missing {missing}")
        return torch.cat([_entry_features(space, obs[key]) for key, space in self.entries.items()], dim=-1)


class ImageEncoder(Encoder):
    """A channels-first image ``[B, *shape]``; an integer one as float32 divided by ``scale`` (a float
    one, such as RND's normalised observations, as it is).

    With ``channels_last_backward``, a CPU batch that records gradients is laid out channels-last
    (the same values, other strides): oneDNN's convolution backward of the Nature CNN runs about 15%
    faster on such inputs, while its forward without gradients (acting, targets) runs about 9%
    slower, so only the batch being learned from is converted (``benchmarks/atari.py``). MinAtar's
    3x3 network is slower channels-last either way and keeps the default layout.

    With ``input_major_dense``, the dense layers' weights are stored transposed
    (:func:`store_input_major`): a MinAtar DQN preset trains about 10% faster so, with the same
    results bit for bit; the Nature CNN's 3136x512 layer gains nothing and rounds differently."""

    def __init__(self, shape: tuple[int, ...], scale: float, layers: Sequence[nn.Module],
                 channels_last_backward: bool = False, input_major_dense: bool = False) -> None:
        super().__init__(*layers)
        self.shape = shape
        self.scale = scale
        self.channels_last_backward = channels_last_backward
        if input_major_dense:
            for layer in self:
                if isinstance(layer, nn.Linear):
                    store_input_major(layer)

    def prepare(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.dim() != 4 or tuple(obs.shape[1:]) != self.shape:
            raise ValueError(f"model expects images of shape [B, {', '.join(map(str, self.shape))}], "
                             f"got shape {tuple(obs.shape)}")
        learning_on_cpu = self.channels_last_backward and obs.device.type == "cpu" and torch.is_grad_enabled()
        images = obs.to(torch.float32, memory_format=torch.channels_last if learning_on_cpu else torch.preserve_format)
        if obs.is_floating_point() or self.scale == 1.0:  # MinAtar's 0/1 channels: nothing to divide
            return images
        return images.div_(self.scale)  # an integer image's copy is new


def store_input_major(linear: nn.Linear) -> None:
    """Store ``linear``'s weight transposed in memory: the same ``[out, in]`` values and state-dict
    entry, laid out as ``[in, out]`` rows.

    MKL multiplies a small batch by a wide weight stored so about twice as fast as by the usual
    layout (MinAtar's 1024x128 layer at batch 32: ~55 against ~140 us forward, and its weight
    gradient ~65 against ~300 us); :class:`rlpipe.policy.optim.Adam` steps such a weight at
    contiguous speed. Copies (``deepcopy``, ``load_state_dict``, ``.to``) keep the layout.
    """
    linear.weight = nn.Parameter(linear.weight.detach().t().contiguous().t())


def mlp_layers(in_size: int, hidden: Sequence[int], batch_renorm: bool = False) -> tuple[list[nn.Module], int]:
    """``Linear -> ReLU`` per hidden size (with ``batch_renorm``: the input and each ReLU's output
    batch-renormalised) and the size of the last output. Layers are created, and so initialised
    from torch's generator, in order."""
    layers: list[nn.Module] = [BatchRenorm(in_size)] if batch_renorm else []
    for size in hidden:
        layers += [nn.Linear(in_size, size), nn.ReLU(inplace=True)]  # Linear's backward needs no output
        if batch_renorm:
            layers.append(BatchRenorm(size))
        in_size = size
    return layers, in_size


def mlp(in_size: int, hidden: Sequence[int], out_size: int) -> nn.Sequential:
    """An MLP on float vectors of ``in_size``: ``Linear -> ReLU`` per hidden size, then a linear output."""
    layers, last = mlp_layers(in_size, hidden)
    return nn.Sequential(*layers, nn.Linear(last, out_size))


def as_shape(obs_shape: ObsShape) -> tuple[int, ...]:
    """``policy.model.obs_shape`` as a tuple: ``4`` is ``(4,)``."""
    shape = (int(obs_shape),) if isinstance(obs_shape, int) else tuple(int(n) for n in obs_shape)
    if not shape or min(shape) <= 0:
        raise ValueError(f"obs_shape must be positive sizes, got {obs_shape}")
    return shape


def obs_size(obs_shape: ObsShape) -> int:
    """The number of values in one observation of ``obs_shape``."""
    return prod(as_shape(obs_shape))


def observation_space(obs: ObsShape | spaces.Space[Any]) -> spaces.Space[Any]:
    """``obs`` as a space: a shape (``policy.model.obs_shape``) is an unbounded float32 ``Box``."""
    if isinstance(obs, spaces.Space):
        return obs
    return spaces.Box(-np.inf, np.inf, as_shape(obs), dtype=np.float32)


def model_observation_space(model_cfg: Any) -> spaces.Space[Any]:
    """The observation space ``policy.model`` describes: a ``MultiDiscrete`` of ``obs_categories``
    when set (``Discrete`` and ``MultiDiscrete`` envs), an image ``Box`` of ``obs_shape`` in
    ``[0, obs_high]`` of ``obs_dtype`` when those are set (``fill_model_shapes`` sets them for
    image envs), else an unbounded float32 ``Box`` of ``obs_shape``."""
    nvec = getattr(model_cfg, "obs_categories", None)
    if nvec is not None:
        return spaces.MultiDiscrete(list(nvec))
    dtype, high = getattr(model_cfg, "obs_dtype", None), getattr(model_cfg, "obs_high", None)
    if dtype is None:
        return observation_space(model_cfg.obs_shape)
    return spaces.Box(0, high if high is not None else np.iinfo(dtype).max, as_shape(model_cfg.obs_shape), dtype=dtype)


def is_image(space: spaces.Space[Any]) -> bool:
    """Whether ``space`` holds channels-first images: a 3-D ``Box`` of an integer dtype ``[C, H, W]``
    with no more channels than pixels a side (``uint8 [4, 84, 84]``, MinAtar's ``[10, 10, 10]``;
    not a channels-last ``[84, 84, 4]``)."""
    if not (isinstance(space, spaces.Box) and len(space.shape) == 3 and np.issubdtype(space.dtype, np.integer)):
        return False
    channels, height, width = space.shape
    return channels <= min(height, width)


def check_sizes(obs_shape: ObsShape | spaces.Space[Any], action_shape: int) -> None:
    """A network's sizes must be positive (a shape or a space is checked by :func:`observation_space`)."""
    if (isinstance(obs_shape, int) and obs_shape <= 0) or action_shape <= 0:
        raise ValueError(f"obs_shape and action_shape must be positive, got {obs_shape} and {action_shape}")


def flat_size(space: spaces.Space[Any]) -> int:
    """The number of floats the ``mlp`` encoder reads from one observation of ``space``: a ``Box``'s
    or ``MultiBinary``'s values, the one-hot width of a ``Discrete`` or ``MultiDiscrete``, a
    ``Dict``'s entries together."""
    if isinstance(space, spaces.Dict):
        return sum(flat_size(sub) for sub in space.spaces.values())
    if isinstance(space, (spaces.Box, spaces.MultiBinary)):
        return prod(space.shape)
    nvec = categories(space)
    if nvec is not None:
        return sum(nvec)
    raise ValueError(f"the mlp encoder reads Box, MultiBinary, Discrete, MultiDiscrete or Dict observations, "
                     f"got {describe(space)}")


def dict_keys(space: spaces.Dict) -> tuple[str, ...]:
    """The concatenation order of a ``Dict`` space: :data:`GOAL_LAYOUT` for a goal dict, else the space's own."""
    keys = tuple(space.spaces)
    return GOAL_LAYOUT if set(keys) == set(GOAL_LAYOUT) else keys


def _mlp_encoder(space: spaces.Space[Any], cfg: Any) -> tuple[Encoder, int]:
    hidden = list(cfg.encoder_hidden_size_list)
    layers, n_features = mlp_layers(flat_size(space), hidden, bool(getattr(cfg, "batch_renorm", False)))
    if isinstance(space, spaces.Dict):
        return DictEncoder({key: space[key] for key in dict_keys(space)}, layers), n_features
    nvec = categories(space)
    if nvec is not None:
        return OneHotEncoder(nvec, layers), n_features
    assert isinstance(space, (spaces.Box, spaces.MultiBinary))  # flat_size refused the rest
    return MlpEncoder(tuple(space.shape), layers), n_features


def _image_encoder(layers: Callable[[tuple[int, ...]], tuple[list[nn.Module], int]], channels_last_backward: bool,
                   input_major_dense: bool) -> Callable[[spaces.Space[Any], Any], tuple[Encoder, int]]:
    def build(space: spaces.Space[Any], cfg: Any) -> tuple[Encoder, int]:
        assert isinstance(space, spaces.Box)  # encoder_kind refused the rest
        shape = tuple(int(n) for n in space.shape)
        image_layers, n_features = layers(shape)
        encoder = ImageEncoder(shape, image_scale(space), image_layers, channels_last_backward, input_major_dense)
        return encoder, n_features

    return build


mlp_encoder = _mlp_encoder
"""The ``mlp`` row of :data:`rlpipe.config.encoders.ENCODERS`."""
nature_cnn_encoder = _image_encoder(nature_cnn_layers, channels_last_backward=True, input_major_dense=False)
"""The ``nature_cnn`` row."""
minatar_cnn_encoder = _image_encoder(functools.partial(minatar_cnn_layers, conv=PatchConv2d),
                                     channels_last_backward=False, input_major_dense=True)
"""The ``minatar_cnn`` row."""

IMAGE_MIN_SIZE = {"nature_cnn": NATURE_MIN_SIZE, "minatar_cnn": MINATAR_MIN_SIZE}
"""The smallest image side each image encoder reads."""


def check_encoder_reads(kind: str, space: spaces.Space[Any]) -> None:
    """A one-line error naming ``policy.model.encoder`` when encoder ``kind`` cannot read ``space``."""
    shape = space.shape if isinstance(space, spaces.Box) else ()
    if kind == "mlp" and is_image(space):
        reason = "it reads vectors; images need nature_cnn, minatar_cnn or auto"
    elif kind in IMAGE_MIN_SIZE and len(shape) != 3:
        reason = "it reads channels-first images [C, H, W]"
    elif kind in IMAGE_MIN_SIZE and min(shape[1:]) < IMAGE_MIN_SIZE[kind]:
        reason = f"its convolutions need images of at least {IMAGE_MIN_SIZE[kind]}x{IMAGE_MIN_SIZE[kind]} pixels"
    else:
        return
    raise ValueError(f"policy.model.encoder '{kind}' cannot read observations {describe(space)}: {reason}")


def encoder_kind(observation_space: spaces.Space[Any], kind: str = "auto") -> str:
    """The encoder kind for ``observation_space``: ``kind`` itself (a built-in one checked against the
    space; a user's ``package.module:Class`` as it is), or with ``auto`` the one the space calls for:
    ``mlp`` for flat ``Box`` observations and dicts of them; for images (:func:`is_image`: a
    channels-first integer ``Box`` ``[C, H, W]``) ``nature_cnn`` when ``H`` and ``W`` are at least
    36 pixels, else ``minatar_cnn``."""
    if kind != AUTO:
        check_encoder_name(kind)
        if not is_import_path(kind):
            check_encoder_reads(kind, observation_space)
        return kind
    space = observation_space
    if isinstance(space, spaces.Box) and is_image(space):
        return "nature_cnn" if min(space.shape[1:]) >= NATURE_MIN_SIZE else "minatar_cnn"
    if _channels_last_image(space):
        raise ValueError(
            f"observations {describe(space)} look like channels-last images [H, W, C]; the image encoders read "
            "channels-first [C, H, W] (transpose them with a wrapper in env.wrappers), or set "
            "policy.model.encoder=mlp to flatten them"
        )
    if isinstance(space, spaces.Dict) and all(_mlp_reads(sub) for sub in space.spaces.values()):
        return "mlp"
    if _mlp_reads(space):
        return "mlp"
    raise ValueError(
        f"no encoder is chosen automatically for observations {describe(space)}; the mlp encoder reads Box, "
        "MultiBinary, Discrete and MultiDiscrete observations and dicts of them"
    )


def _channels_last_image(space: spaces.Space[Any]) -> bool:
    return (isinstance(space, spaces.Box) and len(space.shape) == 3 and np.issubdtype(space.dtype, np.integer)
            and not is_image(space))


def _mlp_reads(space: spaces.Space[Any]) -> bool:
    """Whether ``auto`` gives ``space`` (not a dict) to the ``mlp`` encoder: any non-image ``Box``, flattened,
    and the discrete spaces."""
    if isinstance(space, spaces.Box):
        return not is_image(space) and not _channels_last_image(space)
    return isinstance(space, (spaces.MultiBinary, spaces.Discrete, spaces.MultiDiscrete))


def describe(space: spaces.Space[Any]) -> str:
    """``space`` in one line: a ``Box`` by its shape and dtype (its bounds print over many lines)."""
    if isinstance(space, spaces.Box):
        return f"Box(shape={space.shape}, dtype={space.dtype})"
    if isinstance(space, spaces.Dict):
        return "Dict(" + ", ".join(f"{key}: {describe(sub)}" for key, sub in space.spaces.items()) + ")"
    return " ".join(str(space).split())


def make_encoder(observation_space: spaces.Space[Any], cfg: Any) -> tuple[nn.Module, int]:
    """The encoder of ``observation_space`` and the number of features it returns.

    ``cfg`` is ``policy.model`` or an :class:`EncoderConfig`: ``encoder`` (absent: ``auto``),
    ``encoder_hidden_size_list`` and ``batch_renorm`` (absent: off; both read by ``mlp`` only),
    ``encoder_kwargs`` (a user encoder's). The layers are drawn from torch's generator in order,
    first to last. A user's encoder that cannot be imported or built is a one-line ``ValueError``
    naming it.
    """
    kind = encoder_kind(observation_space, getattr(cfg, "encoder", AUTO))
    if not is_import_path(kind):
        builder: Callable[[spaces.Space[Any], Any], tuple[Encoder, int]] = import_object(ENCODERS[kind].builder)
        return builder(observation_space, cfg)
    return user_encoder(kind, observation_space, dict(getattr(cfg, "encoder_kwargs", None) or {}))


def user_encoder(path: str, observation_space: spaces.Space[Any], kwargs: dict[str, Any]) -> tuple[nn.Module, int]:
    """``Class(observation_space, **kwargs)`` of the ``package.module:Class`` at ``path`` and its
    ``n_features``; a one-line ``ValueError`` naming the encoder when it cannot be had."""
    try:
        cls = import_object(path)
    except ImportPathError as err:
        raise ValueError(f"encoder '{path}': {err}") from None
    try:
        encoder = cls(observation_space, **kwargs)
    except (TypeError, ValueError) as err:
        raise ValueError(f"encoder '{path}' could not be built with encoder_kwargs {kwargs} ({first_line(err)})"
                         ) from None
    n_features = getattr(encoder, "n_features", None)
    if not isinstance(encoder, nn.Module) or not isinstance(n_features, int) or n_features < 1:
        raise ValueError(f"encoder '{path}' must be an nn.Module with a positive int n_features (the size of the "
                         f"features it returns), got {type(encoder).__name__} with n_features={n_features!r}")
    return encoder, n_features
