"""rlpipe's Adam: torch's arithmetic, bit for bit, on weights stored transposed; its ``zero_grad``."""
import copy

import pytest
import torch
from torch import nn

from rlpipe.model.encoders import store_input_major
from rlpipe.policy.optim import make_adam


def two_layers():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 3))


def step_with_gradients(net, optimizer, step):
    """One step with gradients drawn from ``step`` (the same values whatever the weights' layout)."""
    generator = torch.Generator().manual_seed(step)
    optimizer.zero_grad(set_to_none=True)
    for param in net.parameters():
        param.grad = torch.empty_like(param).copy_(torch.randn(param.shape, generator=generator))
    optimizer.step()


def assert_same_parameters(a, b):
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)


def test_adam_steps_a_transposed_weight_as_torch_steps_the_contiguous_one():
    reference = two_layers()
    reference_optimizer = torch.optim.Adam(reference.parameters(), lr=1e-2, fused=True)
    net = copy.deepcopy(reference)
    store_input_major(net[0])
    optimizer = make_adam(net.parameters(), 1e-2)
    assert net[0].weight.stride() == (1, 8)
    for step in range(8):
        if step == 5:  # a schedule's new learning rate is read at the next step
            for group in (*optimizer.param_groups, *reference_optimizer.param_groups):
                group["lr"] = 3e-3
        step_with_gradients(reference, reference_optimizer, step)
        step_with_gradients(net, optimizer, step)
    assert_same_parameters(net, reference)
    weight = net[0].weight
    assert weight.stride() == (1, 8)  # the layout outlives the steps, the moments' too
    assert optimizer.state[weight]["exp_avg"].stride() == optimizer.state[weight]["exp_avg_sq"].stride() == (1, 8)


def test_moments_of_a_contiguous_checkpoint_step_a_transposed_weight_the_same():
    """A checkpoint written before the weight was stored transposed resumes as it would have."""
    reference = two_layers()
    reference_optimizer = make_adam(reference.parameters(), 1e-2)
    for step in range(3):
        step_with_gradients(reference, reference_optimizer, step)
    net = two_layers()
    store_input_major(net[0])
    optimizer = make_adam(net.parameters(), 1e-2)
    net.load_state_dict(reference.state_dict())
    optimizer.load_state_dict(copy.deepcopy(reference_optimizer.state_dict()))
    assert net[0].weight.stride() == (1, 8)
    assert optimizer.state[net[0].weight]["exp_avg"].stride() == (1, 8)  # laid out as its weight on loading
    for step in range(3, 6):
        step_with_gradients(reference, reference_optimizer, step)
        step_with_gradients(net, optimizer, step)
    assert_same_parameters(net, reference)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    net = two_layers()
    optimizer = make_adam(net.parameters(), 1e-2)
    net(torch.ones(2, 12)).sum().backward()
    optimizer.zero_grad(set_to_none=set_to_none)
    for param in net.parameters():
        assert param.grad is None if set_to_none else torch.count_nonzero(param.grad) == 0


def test_a_checkpoint_of_a_transposed_weight_resumes_in_torchs_adam_the_same():
    """Checkpoints keep the moments contiguous: a plain model and torch's Adam (an older rlpipe,
    another program) resume from them as the transposed weight goes on."""
    net = two_layers()
    store_input_major(net[0])
    optimizer = make_adam(net.parameters(), 1e-2)
    for step in range(3):
        step_with_gradients(net, optimizer, step)
    saved = copy.deepcopy(optimizer.state_dict())
    assert all(entry[key].is_contiguous() for entry in saved["state"].values() for key in ("exp_avg", "exp_avg_sq"))
    assert optimizer.state[net[0].weight]["exp_avg"].stride() == (1, 8)  # the live moments keep their layout
    plain = two_layers()
    plain.load_state_dict(net.state_dict())
    plain_optimizer = torch.optim.Adam(plain.parameters(), lr=1e-2, fused=True)
    plain_optimizer.load_state_dict(saved)
    for step in range(3, 6):
        step_with_gradients(net, optimizer, step)
        step_with_gradients(plain, plain_optimizer, step)
    assert_same_parameters(net, plain)
