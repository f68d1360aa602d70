"""Offline RL: TD3+BC and IQL update throughput vs d3rlpy, and loading a 1M-transition dataset vs one .npz file.

Updates. Gradient updates per second on Hopper-shaped data (obs 11, action 3 in ``[-1, 1]``,
float32, CPU, one torch thread): batch 256, actor and both critics (and IQL's value network)
each a [256, 256] ReLU MLP, Adam at 3e-4, discount 0.99, Polyak ``tau = 0.005``, no gradient
clipping. Each side draws its batches in turn from a pool of 16 random batches made before the
clock starts (the same arrays on both sides), so only the update is timed:

* ``rlpipe``: ``make_policy`` of the presets ``hopper-medium-td3bc`` and ``hopper-medium-iql``
  with ``policy.model.obs_norm=false`` (the presets normalise observations with running
  statistics; d3rlpy's default has no observation scaler, so both do the same work), timed
  through ``policy.learn_mode.forward(batch)`` on a dict of numpy arrays (which also returns the
  metrics as floats and the per-sample ``|td_error|`` as numpy).
* ``d3rlpy`` 2.8.1: ``TD3PlusBCConfig`` / ``IQLConfig(batch_size=256)`` with
  ``VectorEncoderFactory([256, 256])`` for every network, learning rates 3e-4 and d3rlpy's
  defaults otherwise, built with ``create_impl(observation_shape=(11,), action_size=3)`` and
  timed through ``algo.update(batch)`` on ``TransitionMiniBatch`` objects (which also converts
  the batch to tensors and returns the losses as floats). d3rlpy pins gymnasium 1.0.0, so it
  lives in a virtualenv of its own (``--d3rlpy-python``, default ``/work/d3venv/bin/python``):
  this script runs there as a worker process that builds both algorithms and times the rounds
  the parent asks for. Without that interpreter one line says how to make it, d3rlpy's side is
  skipped and its figures and ratios are null.

``td3bc_d3rlpy_ratio`` and ``iql_d3rlpy_ratio`` are rlpipe's updates/s over d3rlpy's (> 1:
rlpipe is faster). Rounds of ``per_round`` updates (an even number: TD3+BC's actor steps every
second update on both sides) alternate between the libraries, the first of each round
alternating too, so that load from other processes hits both alike; each figure is the median
of its rounds. What differs between the two updates (the ratio owes part of itself to these):

* Both: d3rlpy's twin critics are two modules called one after the other (six ``Linear``
  calls); rlpipe's are one ``EnsembleQ`` (three batched products). d3rlpy's Adam is torch's
  default (on the CPU a loop over parameters), rlpipe's the fused kernel (same arithmetic, same
  betas and eps). d3rlpy zeroes gradients in place (``zero_grad(set_to_none=False)``) and
  converts seven arrays per batch (it also carries ``next_actions`` and ``intervals``, and
  computes ``gamma ** intervals``).
* TD3+BC (policy delay 2, smoothing noise 0.2 clipped at 0.5, alpha 2.5 on both): on actor
  steps d3rlpy evaluates both critics at ``(s, mu(s))`` and uses the first, and backpropagates
  the actor's loss into the critics' weights too (gradients its next ``zero_grad`` discards);
  rlpipe evaluates only ``Q_1`` with the critics frozen. The same losses otherwise.
* IQL (expectile 0.7, temperature 3.0, advantage weights clipped at 100 on both): d3rlpy
  steps the critics and the value network together, one loss and one Adam, with the target
  ``V(s')`` taken before that step, and then computes ``min Q'(s, a)`` and ``V(s)`` again for
  the actor's weights (the target critics and the value network once more each); rlpipe steps the value
  network first, then the critics toward the updated ``V(s')`` (three optimizers, as the
  paper's code), and reuses the value step's advantage for the actor. Actors: both a Gaussian
  with a tanh mean and a state-independent log std (d3rlpy's log std is a sigmoid of its
  parameter scaled into ``[-5, 2]`` and its log-probability goes through
  ``torch.distributions.Normal``; rlpipe's is a clamped parameter and a closed form).

Dataset load. ``--transitions`` (1,000,000) Hopper-shaped rows (obs, action, reward, next_obs,
terminated, truncated, env_id: 114 bytes a row) written once in a temporary directory, as an
rlpipe dataset (``rlpipe.data.dataset.write_dataset``: one ``.npy`` file per column and a
sealed manifest) and as one uncompressed ``np.savez`` file. Timed: ``Dataset.open`` (which
checks the seal and every file's SHA-256, then memory-maps the columns), ``DatasetBuffer(...)``
and its first ``sample_batch(256)``, against ``np.load`` with every array read into memory
(and one 256-row batch gathered from them, microseconds). Each load runs in a fresh process of
this interpreter, so that its resident-memory growth (``VmRSS`` in ``/proc/self/status`` after
the load minus before, the loaded objects alive) is not blurred by memory an earlier load freed;
the two kinds alternate, and each figure is the median of ``--load-repeats`` loads. The files
were just written, so both read from the page cache (a warm start: a cold disk adds the same
reading of every byte to both, as rlpipe's open hashes every file). ``load_npz_ratio`` is the
npz seconds over rlpipe's (> 1: rlpipe is faster); the memory growths are plain figures in MiB.
``VmRSS`` counts the file pages a memory map has mapped in, and the kernel maps the page-cache
pages around each faulting row (fault-around; whole folios, which recent kernels make large on
ext4 and xfs), so a first batch of 256 random rows can map most of a 114 MB dataset without
reading or copying it: shared, clean page-cache pages that the kernel can drop.
``*_load_anon_mib`` (``RssAnon``) is the process's own memory, which the npz load fills with its
copy of the data.

Each process first loads a 40,000-row dataset of its kind, timed apart: a process's first
sample of 256 distinct rows from a large buffer loads rlpipe's numba sampling kernel
(``rlpipe.data.buffer.sampling.choose``; numba's cache load imports scipy.linalg), about 0.8 s
and 170 MiB of resident memory on the 2-core development machine. Every rlpipe buffer pays
that once per process, whatever its data came from, so it is not counted in the 1M-row load;
it is reported as ``rlpipe_first_load_s`` and ``rlpipe_first_load_rss_mib`` (and
``npz_first_load_*``, the same first load of the npz kind, for comparison).

Usage: ``python benchmarks/offline.py [--quick] [--rounds N] [--d3rlpy-python PATH|none]``.
The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch
from peers import D3RLPY_PYTHON, D3RLPY_VENV, d3rlpy_python  # benchmarks/peers.py (numpy-free, so the worker has it)

# Only numpy and torch at module level: d3rlpy's interpreter runs this file too (as the worker), without rlpipe.

OBS_SIZE, ACTION_SIZE, BATCH_SIZE, HIDDEN, LR = 11, 3, 256, [256, 256], 3e-4
POOL = 16
"""Random batches made before timing; the updates cycle through them."""
ALGOS = ("td3bc", "iql")
PRESETS = {"td3bc": "hopper-medium-td3bc", "iql": "hopper-medium-iql"}
SMALL_ROWS = 40_000
"""Rows of the dataset each load process loads first (timed apart): enough that sampling 256 distinct rows
takes rlpipe's numba path (``size * (size - 1) <= 2 * population``), so its one-time load is not in the 1M load."""


def make_batches(n: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """``n`` random Hopper-shaped batches of ``BATCH_SIZE`` (rlpipe's keys; the d3rlpy worker reshapes them)."""
    rng = np.random.default_rng(seed)
    return [
        {
            "obs": rng.normal(size=(BATCH_SIZE, OBS_SIZE)).astype(np.float32),
            "action": rng.uniform(-1.0, 1.0, size=(BATCH_SIZE, ACTION_SIZE)).astype(np.float32),
            "reward": rng.normal(size=BATCH_SIZE).astype(np.float32),
            "next_obs": rng.normal(size=(BATCH_SIZE, OBS_SIZE)).astype(np.float32),
            "terminated": rng.random(BATCH_SIZE) < 0.01,
        }
        for _ in range(n)
    ]


def timed_updates(update: Callable[[Any], Any], batches: list[Any], n_updates: int, start: int) -> float:
    """Seconds that ``n_updates`` calls of ``update`` take, cycling through ``batches`` from ``start``."""
    begin = time.perf_counter()
    for i in range(start, start + n_updates):
        update(batches[i % len(batches)])
    return time.perf_counter() - begin


# ---- rlpipe's updates -------------------------------------------------------------------
class RlpipeUpdates:
    """The preset's policy, updated through ``learn_mode.forward``."""

    def __init__(self, algo: str, warmup: int) -> None:
        from rlpipe.config import load_config
        from rlpipe.recipes.build import make_policy

        torch.manual_seed(0)
        # obs_norm off: the presets normalise observations, d3rlpy's default does not (same work on both sides).
        overrides = [f"policy.model.obs_shape={OBS_SIZE}", f"policy.model.action_shape={ACTION_SIZE}",
                     "policy.model.obs_norm=false", "run.torch_threads=1"]
        self.policy = make_policy(load_config(PRESETS[algo], overrides))
        self.batches = make_batches(POOL)
        self.done = 0
        self.run(warmup)

    def run(self, n_updates: int) -> float:
        seconds = timed_updates(self.policy.learn_mode.forward, self.batches, n_updates, self.done)
        self.done += n_updates
        return seconds


# ---- d3rlpy's updates (in its own interpreter) --------------------------------------------
def d3rlpy_worker(warmup: int) -> None:
    """The worker d3rlpy's interpreter runs: build both algorithms, then answer ``run ALGO N`` lines on stdin
    with the seconds of ``N`` updates (one JSON line each on the original stdout), until ``quit``."""
    here = Path(__file__).resolve().parent  # the benchmarks' names (buffer, frames, ...) must not shadow modules
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    reply: TextIO = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever d3rlpy prints goes to stderr, not into the replies

    import d3rlpy
    from d3rlpy.algos import IQLConfig, TD3PlusBCConfig
    from d3rlpy.dataset import TransitionMiniBatch
    from d3rlpy.models.encoders import VectorEncoderFactory

    torch.set_num_threads(1)
    torch.manual_seed(0)
    encoder = VectorEncoderFactory(hidden_units=HIDDEN)  # ReLU; no batch norm, layer norm or dropout (its defaults)
    configs = {
        "td3bc": TD3PlusBCConfig(batch_size=BATCH_SIZE, actor_learning_rate=LR, critic_learning_rate=LR,
                                 actor_encoder_factory=encoder, critic_encoder_factory=encoder),
        "iql": IQLConfig(batch_size=BATCH_SIZE, actor_learning_rate=LR, critic_learning_rate=LR,
                         actor_encoder_factory=encoder, critic_encoder_factory=encoder,
                         value_encoder_factory=encoder),
    }
    batches = [
        TransitionMiniBatch(
            observations=b["obs"], actions=b["action"], rewards=b["reward"][:, None],
            next_observations=b["next_obs"], next_actions=np.zeros_like(b["action"]),
            terminals=b["terminated"].astype(np.float32)[:, None],
            intervals=np.ones((BATCH_SIZE, 1), np.float32), transitions=[],
        )
        for b in make_batches(POOL)
    ]
    algos, done = {}, dict.fromkeys(configs, 0)
    for name, config in configs.items():
        algo = config.create(device=False)  # the CPU
        algo.create_impl(observation_shape=(OBS_SIZE,), action_size=ACTION_SIZE)
        algos[name] = algo
    torch.set_num_threads(1)  # in case building changed it
    for name, algo in algos.items():
        timed_updates(algo.update, batches, warmup, 0)
        done[name] = warmup
    reply.write(json.dumps({"d3rlpy": d3rlpy.__version__, "torch": torch.__version__,
                            "threads": torch.get_num_threads()}) + "\n")
    for line in sys.stdin:
        words = line.split()
        if words == ["quit"]:
            return
        _, name, count = words
        seconds = timed_updates(algos[name].update, batches, int(count), done[name])
        done[name] += int(count)
        reply.write(json.dumps({"seconds": seconds}) + "\n")


class D3rlpyUpdates:
    """The parent's end of :func:`d3rlpy_worker`."""

    def __init__(self, python: str, warmup: int) -> None:
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (the worker's stderr, closed by close())
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).resolve()), "--d3rlpy-worker", "--warmup", str(warmup)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1,
        )
        self.info = self._answer("starting")

    def _answer(self, doing: str) -> dict[str, Any]:
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            self.proc.wait()
            self.log.seek(0)
            tail = self.log.read()[-2000:]
            raise RuntimeError(f"the d3rlpy worker exited ({self.proc.returncode}) while {doing}:\n{tail}")
        return json.loads(line)

    def runner(self, algo: str) -> Callable[[int], float]:
        def run(n_updates: int) -> float:
            assert self.proc.stdin is not None
            self.proc.stdin.write(f"run {algo} {n_updates}\n")
            self.proc.stdin.flush()
            return float(self._answer(f"running {algo}")["seconds"])

        return run

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.log.close()


def start_d3rlpy(python: str, warmup: int) -> D3rlpyUpdates | None:
    """The worker in ``python``, or None (one printed line saying why) where there is none to run."""
    if d3rlpy_python(python) is None:
        return None
    try:
        return D3rlpyUpdates(python, warmup)
    except RuntimeError as err:
        print(f"d3rlpy side skipped: {python} could not build d3rlpy's algorithms ({str(err).splitlines()[-1]}); "
              f"make its virtualenv D with `{D3RLPY_VENV}`")
        return None


# ---- dataset load -------------------------------------------------------------------------
def hopper_columns(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` Hopper-shaped rows of an rlpipe dataset's columns (one env; episodes end at random or at 1,000 steps)."""
    rng = np.random.default_rng(seed)
    terminated = rng.random(n) < 1 / 300
    return {
        "obs": rng.standard_normal((n, OBS_SIZE), dtype=np.float32),
        "action": rng.uniform(-1.0, 1.0, size=(n, ACTION_SIZE)).astype(np.float32),
        "reward": rng.standard_normal(n, dtype=np.float32),
        "next_obs": rng.standard_normal((n, OBS_SIZE), dtype=np.float32),
        "terminated": terminated,
        "truncated": (np.arange(n) % 1000 == 999) & ~terminated,
        "env_id": np.zeros(n, dtype=np.int64),
    }


def write_both(folder: Path, name: str, n: int) -> tuple[Path, Path]:
    """``n`` rows as an rlpipe dataset ``folder/name`` and as ``folder/name.npz``."""
    from gymnasium import spaces

    from rlpipe.data.dataset import write_dataset

    columns = hopper_columns(n)
    obs_space = spaces.Box(-np.inf, np.inf, (OBS_SIZE,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (ACTION_SIZE,), np.float32)
    dataset = folder / name
    write_dataset(dataset, columns, obs_space, action_space, "Hopper-v5", {"source": "benchmarks/offline.py"})
    npz = folder / f"{name}.npz"
    np.savez(npz, **columns)  # type: ignore[arg-type]
    return dataset, npz


def rss_kib() -> dict[str, int]:
    """This process's resident memory in KiB: ``VmRSS`` (all of it) and ``RssAnon`` (its own, not file pages)."""
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return {key: int(fields[key].split()[0]) for key in ("VmRSS", "RssAnon")}


def load_rlpipe(path: Path) -> Any:
    from rlpipe.data.dataset import Dataset, DatasetBuffer

    buffer = DatasetBuffer(Dataset.open(path), seed=0)
    return buffer, buffer.sample_batch(BATCH_SIZE)


def load_npz(path: Path) -> Any:
    with np.load(path, allow_pickle=False) as npz:
        columns = {key: npz[key] for key in npz.files}
    rows = np.random.default_rng(0).integers(len(columns["reward"]), size=BATCH_SIZE)
    return columns, {key: values[rows] for key, values in columns.items()}


def timed_load(load: Callable[[Path], Any], path: Path) -> tuple[Any, float, dict[str, float]]:
    """What ``load(path)`` returns, its seconds and the growth of this process's resident memory (MiB:
    ``VmRSS`` and ``RssAnon``)."""
    gc.collect()
    before = rss_kib()
    start = time.perf_counter()
    keep = load(path)
    seconds = time.perf_counter() - start
    after = rss_kib()
    return keep, seconds, {key: (after[key] - before[key]) / 1024 for key in after}


def load_child(kind: str, small: Path, big: Path) -> None:
    """Two loads in this fresh process, ``small`` first, then ``big``; one JSON line of their seconds and
    resident-memory growths."""
    load = {"rlpipe": load_rlpipe, "npz": load_npz}[kind]
    keep, first_seconds, first_rss = timed_load(load, small)
    del keep
    keep, seconds, rss = timed_load(load, big)
    print(json.dumps({"seconds": seconds, "rss_mib": rss["VmRSS"], "anon_mib": rss["RssAnon"],
                      "first_seconds": first_seconds, "first_rss_mib": first_rss["VmRSS"]}))
    del keep


def measure_loads(transitions: int, repeats: int) -> dict[str, dict[str, float]]:
    """Median seconds and RSS growth of each kind of load, each load in its own process, the kinds alternating."""
    script = str(Path(__file__).resolve())
    results: dict[str, list[dict[str, float]]] = {"rlpipe": [], "npz": []}
    with tempfile.TemporaryDirectory(prefix="rlpipe-offline-bench-") as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        small = write_both(folder, "small", SMALL_ROWS)
        big = write_both(folder, "big", transitions)
        print(f"wrote {transitions:,} transitions both ways in {time.perf_counter() - start:.1f} s")
        for r in range(repeats):
            for kind in ("rlpipe", "npz") if r % 2 == 0 else ("npz", "rlpipe"):
                index = 0 if kind == "rlpipe" else 1
                run = subprocess.run([sys.executable, script, "--load-child", kind, str(small[index]), str(big[index])],
                                     capture_output=True, text=True, check=False)
                if run.returncode != 0:
                    raise RuntimeError(f"the {kind} load process exited with {run.returncode}:\n{run.stderr[-2000:]}")
                results[kind].append(json.loads(run.stdout.strip().splitlines()[-1]))
    return {kind: {key: statistics.median(row[key] for row in rows) for key in rows[0]}
            for kind, rows in results.items()}


# ---- measurement --------------------------------------------------------------------------
def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, or None where a side was not measured (d3rlpy's, without its interpreter)."""
    return None if a is None or b is None else a / b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (a smoke test, figures meaningless)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds per runner (default 40; 2 with --quick)")
    parser.add_argument("--transitions", type=int, default=None,
                        help="rows of the loaded dataset (default 1,000,000; 10,000 with --quick)")
    parser.add_argument("--load-repeats", type=int, default=None, help="loads of each kind (default 5; 1 with --quick)")
    parser.add_argument("--d3rlpy-python", default=D3RLPY_PYTHON,
                        help=f"the interpreter of d3rlpy's own virtualenv, or 'none' (default {D3RLPY_PYTHON})")
    parser.add_argument("--d3rlpy-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=10, help=argparse.SUPPRESS)
    parser.add_argument("--load-child", nargs=3, metavar=("KIND", "SMALL", "BIG"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.d3rlpy_worker:
        d3rlpy_worker(args.warmup)
        return
    if args.load_child:
        kind, small, big = args.load_child
        load_child(kind, Path(small), Path(big))
        return

    rounds, per_round, warmup = (2, 4, 2) if args.quick else (40, 20, 10)
    rounds = args.rounds or rounds
    transitions = args.transitions or (10_000 if args.quick else 1_000_000)
    load_repeats = args.load_repeats or (1 if args.quick else 5)
    # One intra-op thread on both sides: batch-256 products on a 2-core box gain little from a second thread
    # that other processes also want, and thread barriers add noise.
    torch.set_num_threads(1)

    d3rlpy = start_d3rlpy(args.d3rlpy_python, warmup)
    runners: dict[str, Callable[[int], float] | None] = {}
    for algo in ALGOS:
        runners[f"rlpipe_{algo}"] = RlpipeUpdates(algo, warmup).run
        runners[f"d3rlpy_{algo}"] = d3rlpy.runner(algo) if d3rlpy else None
    torch.set_num_threads(1)  # in case building changed it
    if d3rlpy:
        print(f"d3rlpy {d3rlpy.info['d3rlpy']} with torch {d3rlpy.info['torch']} ({d3rlpy.info['threads']} thread) "
              f"in {args.d3rlpy_python}; rlpipe with torch {torch.__version__} ({torch.get_num_threads()} thread)")

    measured = {name: run for name, run in runners.items() if run is not None}
    rates: dict[str, list[float]] = {name: [] for name in measured}
    try:
        for r in range(rounds):
            for algo in ALGOS:
                sides = [name for name in (f"rlpipe_{algo}", f"d3rlpy_{algo}") if name in measured]
                for name in sides if r % 2 == 0 else sides[::-1]:
                    rates[name].append(per_round / measured[name](per_round))
    finally:
        if d3rlpy:
            d3rlpy.close()
    median = {name: statistics.median(rates[name]) if name in rates else None for name in runners}

    loads = measure_loads(transitions, load_repeats)

    ratios = {
        "td3bc_d3rlpy_ratio": ratio(median["rlpipe_td3bc"], median["d3rlpy_td3bc"]),
        "iql_d3rlpy_ratio": ratio(median["rlpipe_iql"], median["d3rlpy_iql"]),
        "load_npz_ratio": ratio(loads["npz"]["seconds"], loads["rlpipe"]["seconds"]),
    }
    print(f"updates/s (median of {rounds} rounds of {per_round}, batch {BATCH_SIZE}, 1 thread, obs {OBS_SIZE}, "
          f"action {ACTION_SIZE})")
    for name, rate in median.items():
        print(f"  {name:<14} {rate:8.1f}" if rate is not None else f"  {name:<14} skipped")
    print(f"load {transitions:,} transitions and draw a first batch of {BATCH_SIZE} (median of {load_repeats}, "
          "each in a fresh process, warm page cache)")
    for kind, label in (("rlpipe", "rlpipe Dataset.open + DatasetBuffer"), ("npz", "np.load of one .npz, in memory")):
        print(f"  {label:<36} {loads[kind]['seconds'] * 1000:8.1f} ms  RSS +{loads[kind]['rss_mib']:7.1f} MiB "
              f"(anonymous +{loads[kind]['anon_mib']:.1f} MiB)")
    print(f"the first load of each process ({SMALL_ROWS:,} rows; rlpipe's loads its numba sampling kernel), apart")
    for kind in ("rlpipe", "npz"):
        print(f"  {kind:<36} {loads[kind]['first_seconds'] * 1000:8.1f} ms  "
              f"RSS +{loads[kind]['first_rss_mib']:7.1f} MiB")
    for name, value in ratios.items():
        print(f"  {name:<20} {value:6.3f}" if value is not None else f"  {name:<20} skipped")
    print(
        json.dumps(
            {
                **{f"{name}_updates_per_s": None if rate is None else round(rate, 1) for name, rate in median.items()},
                "transitions": transitions,
                "rlpipe_load_s": round(loads["rlpipe"]["seconds"], 4),
                "npz_load_s": round(loads["npz"]["seconds"], 4),
                "rlpipe_load_rss_mib": round(loads["rlpipe"]["rss_mib"], 1),
                "npz_load_rss_mib": round(loads["npz"]["rss_mib"], 1),
                "rlpipe_load_anon_mib": round(loads["rlpipe"]["anon_mib"], 1),
                "npz_load_anon_mib": round(loads["npz"]["anon_mib"], 1),
                "rlpipe_first_load_s": round(loads["rlpipe"]["first_seconds"], 4),
                "npz_first_load_s": round(loads["npz"]["first_seconds"], 4),
                "rlpipe_first_load_rss_mib": round(loads["rlpipe"]["first_rss_mib"], 1),
                "npz_first_load_rss_mib": round(loads["npz"]["first_rss_mib"], 1),
                **{name: None if value is None else round(value, 4) for name, value in ratios.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
