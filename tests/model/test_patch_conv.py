"""``PatchConv2d``: MinAtar's convolution as one gathered matrix product, the same layer as ``nn.Conv2d``."""
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from rlpipe.model import EncoderConfig, make_encoder
from rlpipe.model.cnn import PatchConv2d, patch_index


def pair(in_channels, out_channels, kernel, bias=True):
    """An ``nn.Conv2d`` and a ``PatchConv2d`` made from the same draws of torch's generator."""
    torch.manual_seed(0)
    conv = nn.Conv2d(in_channels, out_channels, kernel, bias=bias)
    torch.manual_seed(0)
    return conv, PatchConv2d(in_channels, out_channels, kernel, bias=bias)


@pytest.mark.parametrize("batch, channels, height, width, kernel, bias", [
    (32, 4, 10, 10, 3, True),   # MinAtar Breakout, a learning batch
    (5, 10, 10, 10, 3, True),   # Seaquest's 10 channels, an evaluation batch
    (1, 7, 10, 10, 3, False),   # one observation, no bias
    (3, 2, 9, 12, (2, 4), True),  # a non-square image and kernel
])
def test_values_and_gradients_are_a_convolutions(batch, channels, height, width, kernel, bias):
    conv, patch = pair(channels, 16, kernel, bias)
    assert all(torch.equal(a, b) for a, b in zip(conv.parameters(), patch.parameters(), strict=True))
    images = torch.rand(batch, channels, height, width, requires_grad=True)
    expected, out = conv(images), patch(images)
    assert out.shape == expected.shape and out.is_contiguous()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, [images, *patch.parameters()], grad_out)
    expected_grads = torch.autograd.grad(expected, [images, *conv.parameters()], grad_out)
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_gradients_reach_images_after_acting_in_inference_mode():
    """The cached index may first be made while acting (inference mode); learning through it later
    (gradients with respect to the images) must still work."""
    _, patch = pair(3, 16, 3)
    patch_index.cache_clear()
    with torch.inference_mode():
        patch(torch.rand(2, 3, 7, 7))
    images = torch.rand(2, 3, 7, 7, requires_grad=True)
    patch(images).sum().backward()
    assert images.grad is not None and images.grad.shape == images.shape


@pytest.mark.parametrize("shape, words", [((2, 5, 10, 10), "channels"), ((2, 4, 2, 2), "size")])
def test_bad_images_get_nn_conv2ds_error_naming_the_problem(shape, words):
    """A wrong channel count or an image smaller than the kernel is refused as ``nn.Conv2d`` refuses
    it, naming what is wrong (not a shape error from inside the product, nor an empty output)."""
    conv, patch = pair(4, 16, 3)
    with pytest.raises(RuntimeError) as expected:
        conv(torch.rand(shape))
    with pytest.raises(RuntimeError) as got:
        patch(torch.rand(shape))
    assert str(got.value) == str(expected.value) and words in str(got.value).lower()


def test_channels_last_images_give_the_same_values():
    _, patch = pair(4, 16, 3)
    images = torch.rand(6, 4, 10, 10)
    assert torch.equal(patch(images.to(memory_format=torch.channels_last)), patch(images))


def test_the_patch_index_reads_each_tap_at_each_output_pixel():
    index = patch_index(2, 4, 5, (3, 3))  # taps (c, i, j) x output pixels (y, x) of a 2x3 output
    assert index.shape == (18, 6)
    assert index[0].tolist() == [0, 1, 2, 5, 6, 7]  # tap (0, 0, 0): the top-left 2x3 of channel 0
    assert index[17, 0] == 20 + 2 * 5 + 2  # tap (1, 2, 2) at output (0, 0): channel 1, row 2, column 2


def test_state_dicts_are_interchangeable_with_nn_conv2d():
    conv, patch = pair(4, 16, 3)
    nn.init.normal_(conv.weight)
    patch.load_state_dict(conv.state_dict())
    images = torch.rand(2, 4, 10, 10)
    torch.testing.assert_close(patch(images), conv(images), rtol=1e-5, atol=1e-5)
    assert list(patch.state_dict()) == list(conv.state_dict())


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_traced_layer_is_a_plain_convolution():
    """Export (ONNX, TorchScript) traces the network: the graph holds a convolution, not the gather."""
    _, patch = pair(4, 16, 3)
    images = torch.rand(2, 4, 10, 10)
    traced = torch.jit.trace(patch, (images,))
    kinds = {node.kind() for node in traced.inlined_graph.nodes()}
    assert "aten::_convolution" in kinds and "aten::index_select" not in kinds
    torch.testing.assert_close(traced(images), patch(images), rtol=1e-5, atol=1e-5)


def test_the_minatar_encoder_convolves_so_and_keeps_its_initialisation():
    space = spaces.Box(0, 1, (4, 10, 10), np.uint8)
    torch.manual_seed(3)
    encoder, _ = make_encoder(space, EncoderConfig())
    torch.manual_seed(3)
    plain = nn.Conv2d(4, 16, 3)
    assert isinstance(encoder[0], PatchConv2d)
    assert torch.equal(encoder[0].weight, plain.weight) and torch.equal(encoder[0].bias, plain.bias)
