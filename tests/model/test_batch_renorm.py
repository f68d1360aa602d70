import pytest
import torch

from rlpipe.model.batch_renorm import BatchRenorm


def rows(seed, *shape, loc=3.0, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return loc + scale * torch.randn(*shape, generator=g)


def test_training_mode_normalises_each_feature_over_the_rows():
    norm = BatchRenorm(4)
    x = rows(0, 64, 4)
    y = norm(x)
    torch.testing.assert_close(y.mean(0), torch.zeros(4), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.var(0, correction=0), torch.ones(4), atol=1e-2, rtol=0)  # eps 1e-3 shrinks it a bit


def test_ensemble_members_keep_their_own_statistics():
    norm = BatchRenorm(3, members=2)
    x = torch.stack([rows(1, 32, 3, loc=-5.0), rows(2, 32, 3, loc=7.0, scale=0.5)])
    y = norm(x)
    torch.testing.assert_close(y.mean(1), torch.zeros(2, 3), atol=1e-5, rtol=0)
    torch.testing.assert_close(norm.running_mean, 0.01 * x.mean(1, keepdim=True))
    assert norm.running_mean.shape == (2, 1, 3) and norm.weight.shape == (2, 1, 3)


def test_running_statistics_move_by_momentum_and_eval_mode_uses_them():
    norm = BatchRenorm(2, momentum=0.5)
    x = rows(3, 16, 2)
    norm(x)
    var, mean = torch.var_mean(x, dim=0, keepdim=True, correction=0)
    torch.testing.assert_close(norm.running_mean, 0.5 * mean)
    torch.testing.assert_close(norm.running_var, 0.5 + 0.5 * var)
    assert int(norm.steps) == 1
    norm.eval()
    z = rows(4, 5, 2)
    torch.testing.assert_close(norm(z), (z - norm.running_mean) / torch.sqrt(norm.running_var + 1e-3))
    assert int(norm.steps) == 1  # eval mode leaves the statistics alone


def test_after_warmup_training_output_matches_the_running_statistics():
    # Renormalisation: (x - mean) / std * r + d == (x - running_mean) / running_std while r, d are unclipped
    norm = BatchRenorm(3, warmup_steps=1)
    with torch.no_grad():
        norm.running_mean.fill_(2.5)
        norm.running_var.fill_(3.0)
    norm.steps.fill_(1)
    x = rows(5, 128, 3)
    expected = (x - 2.5) / torch.sqrt(torch.tensor(3.0 + 1e-3))
    torch.testing.assert_close(norm(x), expected, atol=1e-5, rtol=1e-5)


def test_renormalisation_is_clipped_and_warmup_is_plain_batch_norm():
    x = rows(6, 64, 2, loc=0.0, scale=50.0)  # std 50 against a running std of ~1: r would be ~50
    plain = BatchRenorm(2, warmup_steps=10)
    renorm = BatchRenorm(2, warmup_steps=0, r_max=3.0, d_max=5.0)
    y_plain, y_renorm = plain(x), renorm(x)
    var, mean = torch.var_mean(x, dim=0, keepdim=True, correction=0)
    x_hat = (x - mean) / torch.sqrt(var + 1e-3)
    torch.testing.assert_close(y_plain, x_hat)
    d = (mean / 1.0005).clamp(-5.0, 5.0)  # running mean 0, running std sqrt(1 + 1e-3)
    torch.testing.assert_close(y_renorm, x_hat * 3.0 + d, atol=1e-4, rtol=1e-4)


def test_gradients_do_not_flow_through_the_renormalisation():
    x = rows(7, 32, 2).requires_grad_()
    norm = BatchRenorm(2, warmup_steps=0)
    (norm(x) * torch.arange(32.0).unsqueeze(1)).sum().backward()
    # with r, d constants the output is x_hat * r + d, so the input gradient is r times batch norm's
    x2 = x.detach().clone().requires_grad_()
    plain = BatchRenorm(2, warmup_steps=10)
    (plain(x2) * torch.arange(32.0).unsqueeze(1)).sum().backward()
    std = torch.sqrt(x.detach().var(0, correction=0) + 1e-3)
    r = (std / torch.sqrt(torch.tensor(1.0 + 1e-3))).clamp(1 / 3, 3)
    torch.testing.assert_close(x.grad, x2.grad * r, atol=1e-5, rtol=1e-4)


def test_bfloat16_input_is_normalised_in_float32():
    y = BatchRenorm(4)(rows(8, 16, 4).bfloat16())
    assert y.dtype == torch.float32


def test_sizes_must_be_positive():
    with pytest.raises(ValueError, match="features and members must be positive"):
        BatchRenorm(0)
