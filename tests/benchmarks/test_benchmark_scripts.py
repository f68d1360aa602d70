"""Every benchmark script runs on a tiny budget (``--quick``) and ends with its JSON line of figures.

The figures of each script are written out below, so a renamed or lost figure fails its test (a nested
figure is named by its path, ``n_sample_8.ratio``). Every ratio (a key ending in ``ratio``) must be a
positive finite number. A peer library's ratios (stable-baselines3, Tianshou: the ``bench`` extra, not
installed for the tests) are null instead where the peer is not installed, and then the script must say
in one line that it skipped the peer's side; where it is installed, its side runs and its ratios are
checked like the others. ``benchmarks/atari100k.py`` only reads run directories: its own tests are
``tests/tools/test_atari100k_results.py``.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
NOT_SCRIPTS = {"peers"}  # benchmarks/peers.py: what the scripts share
OWN_TESTS = {"atari100k", "offline", "offline_returns"}
TIMEOUT_S = 300

SB3, TIANSHOU = "stable_baselines3", "tianshou"
SKIP_LINES = {SB3: "stable-baselines3 side skipped: stable_baselines3 is not installed (pip install 'rlpipe[bench]')",
              TIANSHOU: "tianshou side skipped: tianshou is not installed (pip install 'rlpipe[bench]')"}


@dataclass(frozen=True)
class Bench:
    """What a script's quick run must print."""

    keys: frozenset[str]
    """Every figure of the JSON line."""
    peer_ratios: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Ratio -> the peers it compares with: null exactly when none of them is installed."""
    explained_nulls: Mapping[str, str] = field(default_factory=dict)
    """Ratio -> the line printed when it is null for another reason (the CPU, a degenerate figure)."""
    extra: tuple[str, str] | None = None
    """A module of an optional extra the script needs, and the extra."""
    args: tuple[str, ...] = ()
    """Arguments after ``--quick``; ``{tmp}`` stands for the test's temporary directory."""


def keys(*names: str) -> frozenset[str]:
    return frozenset(names)


def sb3(*ratios: str) -> dict[str, tuple[str, ...]]:
    return dict.fromkeys(ratios, (SB3,))


BUFFER_OPS = ("push_single", "push_batch8", "sample")
FRAGMENT_FIGURES = ("stacks_bytes_per_transition", "frames_bytes_per_transition", "ratio", "pack_us", "rebuild_us")

BENCHES: dict[str, Bench] = {
    "atari": Bench(
        keys("update_sb3_ratio", "rlpipe_updates_per_s", "sb3_updates_per_s", "update_bf16_sb3_ratio",
             "rlpipe_bf16_updates_per_s", "collector_ratio", "collector_env_steps_per_s", "bare_ale_env_steps_per_s",
             "sample_sb3_ratio", "rlpipe_sample32_us", "sb3_sample32_us", "sampled_buffer", "bytes_per_transition",
             "bytes_transitions"),
        peer_ratios=sb3("update_sb3_ratio", "update_bf16_sb3_ratio", "sample_sb3_ratio"),
        explained_nulls={"update_bf16_sb3_ratio": "bf16-mixed not measured: "},
        extra=("ale_py", "atari"),
    ),
    "buffer": Bench(
        keys("n", "lib_push_n", "raw_bytes_per_transition", "rlpipe_push_single", "rlpipe_push_batch8",
             "rlpipe_sample", "rlpipe_sample_replace", "rlpipe_bytes", "rlpipe_prio", "memory_vs_raw_ratio",
             *(f"{lib}_{op}" for lib in ("numpy_floor", "sb3", "tianshou") for op in BUFFER_OPS),
             *(f"{op}_vs_{lib}_ratio" for lib in ("numpy_floor", "sb3", "tianshou") for op in BUFFER_OPS),
             "numpy_floor_bytes", "sb3_bytes", "tianshou_prio", "prio_vs_tianshou_ratio",
             "sample_vs_fastest_lib_ratio", "sample_no_replace_vs_fastest_lib_ratio"),
        peer_ratios={**sb3(*(f"{op}_vs_sb3_ratio" for op in BUFFER_OPS)),
                     **dict.fromkeys((f"{op}_vs_tianshou_ratio" for op in (*BUFFER_OPS, "prio")), (TIANSHOU,)),
                     **dict.fromkeys(("sample_vs_fastest_lib_ratio", "sample_no_replace_vs_fastest_lib_ratio"),
                                     (SB3, TIANSHOU))},
    ),
    "checkpoint": Bench(keys("bare_save_ms", "sealed_save_ms", "bare_load_ms", "sealed_load_ms", "buffer_save_ms",
                             "buffer_hash_ms", "save_ratio", "load_ratio", "buffer_save_ratio")),
    "collector": Bench(keys("bare_env_steps_per_s", "collector_env_steps_per_s", "collector_ratio")),
    "distributed": Bench(
        keys("floor_transitions_per_s", "delivered_transitions_per_s", "fragments_per_s", "staleness_median",
             "datapath_ratio"),
        extra=("ray", "ray"),
    ),
    "fragment_bytes": Bench(keys(*(f"n_sample_{n}.{figure}" for n in (8, 96) for figure in FRAGMENT_FIGURES)),
                            extra=("ale_py", "atari")),
    "frames": Bench(keys("transitions", "pushed", "frame_bytes", "frame_capacity", "frames_written", "evicted",
                         "bytes_per_transition", "ratio_to_frame", "push_us_per_transition", "sample32_us",
                         "sample32_floor_us", "episode_steps", "nstep")),
    "her": Bench(keys("batched_transitions_per_s", "loop_transitions_per_s", "per_transition_numpy_transitions_per_s",
                      "per_transition_seed_transitions_per_s", "her_speedup_ratio", "per_transition_numpy_cost_ratio",
                      "per_transition_seed_cost_ratio")),
    "her_fetch": Bench(
        keys("steps", "seed", "rlpipe_updates_per_episode", "rlpipe_wall_s", "sb3_wall_s",
             "rlpipe_first_success_0_9_step", "sb3_first_success_0_9_step", "rlpipe_final_success",
             "sb3_final_success", "wall_ratio"),
        peer_ratios=sb3("wall_ratio"),
        extra=("gymnasium_robotics", "robotics"),
    ),
    "learner": Bench(keys("rlpipe_updates_per_s", "handwritten_updates_per_s", "handwritten_metrics_updates_per_s",
                          "learner_ratio", "learner_vs_hand_metrics_ratio")),
    "minatar": Bench(
        keys("game", "steps", "seeds", "episodes", "rlpipe_return_mean", "sb3_return_mean", "rlpipe_wall_s_mean",
             "sb3_wall_s_mean", "wall_time_sb3_ratio", "return_sb3_ratio"),
        peer_ratios=sb3("wall_time_sb3_ratio", "return_sb3_ratio"),
        explained_nulls={"return_sb3_ratio": "return_sb3_ratio is null: SB3's mean final return is 0"},
        extra=("minatar", "minatar"),
        args=("--out", "{tmp}", "--results", "{tmp}/sb3.jsonl"),  # rlpipe's runs (else a temp dir that stays)
    ),
    "numerics": Bench(keys("adam_ieee_ms", "adam_flush_ms", "flush_denormal_ratio", "noisy_act_ratio",
                           "noisy_update_ratio", "noisy_256_rows_ratio", "der_update_noisy_encoder_ms",
                           "der_update_head_only_ms", "noisy_encoder_cost_ratio")),
    "sac": Bench(
        keys(*(f"{runner}_updates_per_s" for runner in ("rlpipe_sac", "rlpipe_sac_bf16", "hand_sac", "sb3_sac",
                                                        "matmul_floor", "rlpipe_td3", "rlpipe_td3_bf16", "sb3_td3",
                                                        "rlpipe_crossq")),
             "hand_ratio", "sb3_ratio", "td3_sb3_ratio", "floor_ratio", "floor_sb3_ratio", "bf16_sb3_ratio",
             "bf16_fp32_ratio", "td3_bf16_sb3_ratio", "crossq_sac_ratio"),
        peer_ratios=sb3("sb3_ratio", "td3_sb3_ratio", "floor_sb3_ratio", "bf16_sb3_ratio", "td3_bf16_sb3_ratio"),
    ),
    "sequence": Bench(keys("steps", "sequence_len", "batch", "sequences", "numpy_gather_us", "rlpipe_sample_us",
                           "numpy_take_us", "gather_ratio", "take_ratio", "push16_us", "rlpipe_r2d2_updates_per_s",
                           "hand_r2d2_updates_per_s", "hand_ratio")),
}
MARKS = {"distributed": [pytest.mark.ray]}
"""None is marked slow: every quick run took 2-14 s on the loaded 2-core development machine."""


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def flat(figures: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``figures`` with nested objects' keys as paths (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``)."""
    out: dict[str, Any] = {}
    for key, value in figures.items():
        if isinstance(value, Mapping):
            out |= flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def closed_loopback_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def quick_run(name: str, args: tuple[str, ...] = ()) -> str:
    """Stdout of ``benchmarks/<name>.py --quick [args]``, which must exit with status 0."""
    env = dict(os.environ)
    if name == "distributed":  # Ray's start-up asks cloud metadata servers: keep it off the network
        proxy = f"http://127.0.0.1:{closed_loopback_port()}"
        env |= dict.fromkeys(("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"), proxy)
    try:
        run = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), "--quick", *args], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"benchmarks/{name}.py --quick ran past {TIMEOUT_S} s; its output:\n{err.stdout}\n{err.stderr}")
    assert run.returncode == 0, f"benchmarks/{name}.py --quick exited with {run.returncode}:\n{run.stderr[-3000:]}"
    return run.stdout


def test_every_benchmark_script_is_smoke_tested() -> None:
    scripts = {path.stem for path in BENCHMARKS.glob("*.py")} - NOT_SCRIPTS - OWN_TESTS
    assert scripts == set(BENCHES)


@pytest.mark.parametrize("name", [pytest.param(name, marks=MARKS.get(name, [])) for name in sorted(BENCHES)])
def test_quick_run_ends_with_its_figures(name: str, tmp_path: Path) -> None:
    bench = BENCHES[name]
    if bench.extra is not None:
        module, extra = bench.extra
        pytest.importorskip(module, reason=f"benchmarks/{name}.py needs the '{extra}' extra")
    out = quick_run(name, tuple(arg.format(tmp=tmp_path) for arg in bench.args))
    figures = flat(json.loads(out.strip().splitlines()[-1]))
    assert set(figures) == bench.keys

    for peer, line in SKIP_LINES.items():
        if any(peer in peers for peers in bench.peer_ratios.values()) and not installed(peer):
            assert line in out.splitlines()
    for key, value in figures.items():
        if not key.endswith("ratio"):
            continue
        peers = bench.peer_ratios.get(key, ())
        if peers and not any(installed(peer) for peer in peers):
            assert value is None, f"{key}: {value}, but {' and '.join(peers)} not installed"
        elif value is None:
            assert key in bench.explained_nulls and bench.explained_nulls[key] in out, f"{key} is null"
        else:
            assert isinstance(value, int | float) and math.isfinite(value) and value > 0, f"{key}: {value}"
