"""Whether a device does bfloat16 arithmetic natively, for ``policy.learn.precision=bf16-mixed``.

bfloat16 products pay only where the hardware has them: a SAC update takes 1.28-1.31x fewer
seconds than float32's on a CPU with AVX512-BF16 (``benchmarks/sac.py``), while a CPU without
them (AVX2 or plain AVX512) emulates them in software, several times slower than float32. So
``bf16-mixed`` falls back to float32 where the device has no native bfloat16 arithmetic, and one
line says why.
"""
from __future__ import annotations

from pathlib import Path

import torch

CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
"""``/proc/cpuinfo`` flags of native bfloat16 arithmetic (x86: AVX512-BF16, AMX; Arm: BF16)."""
CPUINFO = Path("/proc/cpuinfo")


def cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags from ``/proc/cpuinfo`` (x86 ``flags``, Arm ``Features``); None
    where the file is missing (not Linux)."""
    try:
        text = CPUINFO.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return None


def bf16_fallback_reason(device: torch.device) -> str | None:
    """Why ``device`` should not run bfloat16 products (it has no native bfloat16 arithmetic), or
    None when it has. A CPU is judged by its flags; without ``/proc/cpuinfo``, by torch's probe
    of the oneDNN bfloat16 kernels. A GPU by ``torch.cuda.is_bf16_supported``."""
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported(including_emulation=False):
            return None
        return f"GPU {torch.cuda.get_device_name(device)} has no native bfloat16 arithmetic"
    flags = cpu_flags()
    capability = torch.backends.cpu.get_cpu_capability()
    if flags is None:  # not Linux: torch's own test of its oneDNN bfloat16 kernels (it has no public one)
        if torch.ops.mkldnn._is_mkldnn_bf16_supported():
            return None
        return f"this CPU (torch capability {capability}) has no bfloat16 kernels in torch"
    if flags & CPU_BF16_FLAGS:
        return None
    return (f"this CPU (torch capability {capability}) has no native bfloat16 arithmetic "
            f"(no {' or '.join(sorted(CPU_BF16_FLAGS))} flag in {CPUINFO})")
