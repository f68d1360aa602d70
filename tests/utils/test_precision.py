"""``bf16-mixed`` runs bfloat16 products only where the device has native bfloat16 arithmetic."""
from __future__ import annotations

import logging

import pytest
import torch

from rlpipe.policy import SACPolicy
from rlpipe.utils import precision
from rlpipe.utils.precision import bf16_fallback_reason, cpu_flags
from tests.policy import test_sac
from tests.policy.test_precision import BF16, build

CPU = torch.device("cpu")


def test_cpu_flags_are_read_from_cpuinfo(tmp_path, monkeypatch):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    monkeypatch.setattr(precision, "CPUINFO", info)
    assert cpu_flags() == {"fpu", "sse", "avx2", "avx512f"}
    monkeypatch.setattr(precision, "CPUINFO", tmp_path / "missing")
    assert cpu_flags() is None


@pytest.mark.parametrize(("flags", "native"), [({"avx2", "avx512f"}, False), ({"avx512f", "avx512_bf16"}, True),
                                               ({"amx_bf16"}, True), ({"asimd", "bf16"}, True)])
def test_a_cpu_is_judged_by_its_bf16_flags(monkeypatch, flags, native):
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset(flags))
    reason = bf16_fallback_reason(CPU)
    assert (reason is None) == native
    if reason is not None:
        assert "no native bfloat16 arithmetic" in reason and "avx512_bf16" in reason


@pytest.mark.parametrize("native", [True, False])
def test_bf16_mixed_falls_back_to_fp32_in_one_line_without_native_bf16(monkeypatch, caplog, native):
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2", *(["avx512_bf16"] if native else [])}))
    caplog.set_level(logging.WARNING)
    fp32, mixed = build(SACPolicy, "fp32"), build(SACPolicy, BF16)
    lines = [r.getMessage() for r in caplog.records if "bf16" in r.getMessage()]
    batch = test_sac.make_batch(0)
    same = fp32.learn_mode.forward(batch)["critic_loss"] == mixed.learn_mode.forward(batch)["critic_loss"]
    if native:
        assert lines == [] and not same  # bfloat16 products round differently
    else:
        assert len(lines) == 1 and lines[0].startswith("learn.precision=bf16-mixed falls back to fp32: this CPU")
        assert same
