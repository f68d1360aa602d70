"""The layers of the image encoders (``nature_cnn``, ``minatar_cnn``) over channels-first images ``[C, H, W]``.

- :func:`nature_cnn_layers`: the DQN network of Mnih et al. (2015) for 84x84 stacks of Atari frames:
  conv 32 8x8 stride 4, conv 64 4x4 stride 2, conv 64 3x3 stride 1 (each with ReLU), flatten,
  a 512-unit layer with ReLU. Its convolutions need images of at least
  :data:`NATURE_MIN_SIZE` pixels a side.
- :func:`minatar_cnn_layers`: the MinAtar network of Young & Tian (2019) for 10x10 inputs: conv 16
  3x3 stride 1 with ReLU, flatten, a 128-unit layer with ReLU.
- :class:`PatchConv2d`: the MinAtar encoder's convolution, computed on CPU as a matrix product of
  gathered patches (oneDNN is slow on so small a layer).

Images travel in their own dtype (``uint8``: a quarter of float32's bytes through the buffer,
the batch and the copy to the device); ``rlpipe.model.encoders.ImageEncoder`` converts them to
float32 and divides by :func:`image_scale` there, on the network's device: 255 for Atari frames,
1 for MinAtar's 0/1 channels. Layers keep torch's default initialisation, as CleanRL's DQN on Atari
does (SB3 uses orthogonal init; neither is the paper's, and DQN learns with both).
"""
from __future__ import annotations

import functools

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

__all__ = ["MINATAR_MIN_SIZE", "NATURE_MIN_SIZE", "PatchConv2d", "image_scale", "minatar_cnn_layers",
           "nature_cnn_layers"]

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


def minatar_cnn_layers(shape: tuple[int, ...], conv: type[nn.Conv2d] = nn.Conv2d) -> tuple[list[nn.Module], int]:
    """The MinAtar DQN network's layers over ``[C, H, W]`` images, and its 128 features; the
    convolution is a ``conv`` (rlpipe's encoder uses :class:`PatchConv2d`, same parameters)."""
    channels, height, width = shape
    flat = 16 * _conv_out(height, 3, 1) * _conv_out(width, 3, 1)
    layers: list[nn.Module] = [
        conv(channels, 16, 3), nn.ReLU(inplace=True),
        nn.Flatten(), nn.Linear(flat, 128), nn.ReLU(inplace=True),
    ]
    return layers, 128


@functools.cache
def patch_index(channels: int, height: int, width: int, kernel: tuple[int, int]) -> torch.Tensor:
    """For an image ``[C, H, W]`` flattened, the position of each kernel tap at each output pixel:
    int64 ``[C * kh * kw, out_h * out_w]`` (stride 1, no padding), taps in ``nn.Conv2d``'s weight order.
    Made outside inference mode (acting is often the first caller), so gradients may flow through it."""
    kh, kw = kernel
    out_h, out_w = _conv_out(height, kh, 1), _conv_out(width, kw, 1)
    with torch.inference_mode(False):
        channel = torch.arange(channels).view(-1, 1, 1, 1, 1) * height * width
        row = torch.arange(kh).view(1, -1, 1, 1, 1) + torch.arange(out_h).view(1, 1, 1, -1, 1)
        col = torch.arange(kw).view(1, 1, -1, 1, 1) + torch.arange(out_w).view(1, 1, 1, 1, -1)
        return (channel + row * width + col).reshape(channels * kh * kw, out_h * out_w)


class PatchConv2d(nn.Conv2d):
    """A stride-1 convolution without padding (``nn.Conv2d``'s parameters, state dict and
    initialisation) computed on CPU as a batched matrix product of its weight with each image's
    patches, gathered by one ``index_select`` (im2col).

    oneDNN's convolution is slow for MinAtar's small layer (16 3x3 filters over 10x10 images at
    batch 32): its weight gradient alone took ~250 us of a ~2.2 ms DQN update. So computed, a MinAtar
    DQN update took 5-19% less time in paired runs (the whole run beside SB3: ``benchmarks/minatar.py``).
    The products are summed in another order than oneDNN's, so the values differ from ``nn.Conv2d``'s
    by rounding (~1e-7). On other devices (cuDNN), and when traced for export (a plain convolution in
    the graph), ``nn.Conv2d``'s forward runs.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int],
                 bias: bool = True) -> None:
        super().__init__(in_channels, out_channels, kernel_size, bias=bias)

    def _gathers(self, images: torch.Tensor) -> bool:
        """Whether the gathered product computes ``images``: a CPU batch ``[B, in_channels, H, W]``
        at least the kernel's size, not being traced. Anything else goes to ``nn.Conv2d``, which
        also names what is wrong with a bad input (channels, size)."""
        return (images.device.type == "cpu" and images.dim() == 4 and images.shape[1] == self.in_channels
                and images.shape[2] >= self.kernel_size[0] and images.shape[3] >= self.kernel_size[1]
                and not torch.jit.is_tracing())

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if not self._gathers(images):
            return super().forward(images)
        batch, channels, height, width = images.shape
        kh, kw = self.kernel_size
        index = patch_index(channels, height, width, (kh, kw))
        patches = images.reshape(batch, -1).index_select(1, index.view(-1)).view(batch, *index.shape)
        weight = self.weight.view(1, self.out_channels, -1).expand(batch, -1, -1)
        if self.bias is None:
            out = torch.bmm(weight, patches)
        else:
            out = torch.baddbmm(self.bias.view(1, -1, 1), weight, patches)
        return out.view(batch, self.out_channels, _conv_out(height, kh, 1), _conv_out(width, kw, 1))
