"""The layers of the image encoders (``nature_cnn``, ``minatar_cnn``) over channels-first images ``[C, H, W]``.

- :func:`nature_cnn_layers`: the DQN network of Mnih et al. (2015) for 84x84 stacks of Atari frames:
  conv 32 8x8 stride 4, conv 64 4x4 stride 2, conv 64 3x3 stride 1 (each with ReLU), flatten,
  a 512-unit layer with ReLU. Its convolutions need images of at least
  :data:`NATURE_MIN_SIZE` pixels a side.
- :func:`minatar_cnn_layers`: the MinAtar network of Young & Tian (2019) for 10x10 inputs: conv 16
  3x3 stride 1 with ReLU, flatten, a 128-unit layer with ReLU.

Images travel in their own dtype (``uint8``: a quarter of float32's bytes through the buffer,
the batch and the copy to the device); ``rlpipe.model.encoders.ImageEncoder`` converts them to
float32 and divides by :func:`image_scale` there, on the network's device: 255 for Atari frames,
1 for MinAtar's 0/1 channels. Layers keep torch's default initialisation, as CleanRL's DQN on Atari
does (SB3 uses orthogonal init; neither is the paper's, and DQN learns with both).
"""
from __future__ import annotations

import numpy as np
from gymnasium import spaces
from torch import nn

__all__ = ["MINATAR_MIN_SIZE", "NATURE_MIN_SIZE", "image_scale", "minatar_cnn_layers", "nature_cnn_layers"]

NATURE_MIN_SIZE = 36
"""The smallest side the Nature CNN's convolutions take: (36 - 8) / 4 + 1 = 8, (8 - 4) / 2 + 1 = 3, 3 - 3 + 1 = 1."""
MINATAR_MIN_SIZE = 3
"""The smallest side MinAtar's 3x3 convolution takes."""


def image_scale(space: spaces.Box) -> float:
    """What an image is divided by: the space's largest ``high`` for integer images (255 for Atari,
    1 for MinAtar), 1 for float images or an unbounded space (already on their own scale)."""
    high = float(np.max(space.high))
    return high if np.issubdtype(space.dtype, np.integer) and np.isfinite(high) and high > 0 else 1.0


def _conv_out(size: int, kernel: int, stride: int) -> int:
    return (size - kernel) // stride + 1


def nature_cnn_layers(shape: tuple[int, ...]) -> tuple[list[nn.Module], int]:
    """The Nature DQN network's layers over ``[C, H, W]`` images, and its 512 features."""
    channels, height, width = shape
    convs = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
    layers: list[nn.Module] = []
    for out, kernel, stride in convs:
        layers += [nn.Conv2d(channels, out, kernel, stride), nn.ReLU(inplace=True)]
        channels, height, width = out, _conv_out(height, kernel, stride), _conv_out(width, kernel, stride)
    layers += [nn.Flatten(), nn.Linear(channels * height * width, 512), nn.ReLU(inplace=True)]
    return layers, 512


def minatar_cnn_layers(shape: tuple[int, ...]) -> tuple[list[nn.Module], int]:
    """The MinAtar DQN network's layers over ``[C, H, W]`` images, and its 128 features."""
    channels, height, width = shape
    flat = 16 * _conv_out(height, 3, 1) * _conv_out(width, 3, 1)
    layers: list[nn.Module] = [
        nn.Conv2d(channels, 16, 3, 1), nn.ReLU(inplace=True),
        nn.Flatten(), nn.Linear(flat, 128), nn.ReLU(inplace=True),
    ]
    return layers, 128
