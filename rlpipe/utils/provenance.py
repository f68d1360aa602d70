"""What ran: the git commit of the rlpipe source and the machine, for the records runs and datasets keep."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def code_version() -> str:
    """The git commit of the rlpipe source that runs (``+dirty`` with uncommitted changes), else its version."""
    from rlpipe import __version__

    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "rlpipe"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"rlpipe {__version__}"
    return f"{commit}{'+dirty' if dirty else ''}" if commit else f"rlpipe {__version__}"


def machine_description(device: Any = "cpu") -> str:
    """The machine that runs: the CPU's model, the cores this process may use, torch's CPU kernel set
    and, when ``device`` is a GPU, its name (``"AMD EPYC 7B13, 2 cores, AVX2"``; no ``;``, which
    joins the machines of a resumed run).

    Wall times and float kernels differ between machines (an AVX-512 Xeon and an AVX2 EPYC round the
    same run differently), so a run's record names the machine that made it and a report keeps runs
    of other machines apart."""
    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    text = f"{_cpu_model()}, {cores} cores, {torch.backends.cpu.get_cpu_capability()}"
    device = torch.device(device)
    if device.type == "cuda":
        text += f", {torch.cuda.get_device_name(device)}"
    return text


def _cpu_model() -> str:
    """The CPU's marketing name (Linux's ``/proc/cpuinfo``), else what :mod:`platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"
