"""The user API sits above the recipes and picks a remote backend by name: rlpipe.entry imports
without rlpipe.distributed, rlpipe.distributed without rlpipe.entry, and ``train`` runs whichever
backend :data:`~rlpipe.recipes.backends.REMOTE_BACKENDS` names."""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rlpipe.config import ConfigError
from rlpipe.entry import train
from rlpipe.framework import OnlineRLContext
from rlpipe.recipes.backends import REMOTE_BACKENDS, remote_backend

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_user_api_imports_with_the_distributed_package_blocked():
    out = run_python(
        "import sys; sys.modules['rlpipe.distributed'] = None\n"
        "import rlpipe.entry, rlpipe.entry.agent, rlpipe.entry.evaluate, rlpipe.entry.train, rlpipe.cli.main\n"
        "print(sorted(m for m in sys.modules if m.startswith('rlpipe.distributed.')))"
    )
    assert out == "[]"


def test_the_distributed_package_imports_without_the_user_api():
    out = run_python("import sys, rlpipe.distributed\n"
                     "print(sorted(m for m in sys.modules if m.startswith('rlpipe.entry')))")
    assert out == "[]"


def test_the_ray_backend_is_found_by_name():
    from rlpipe.distributed.backend import ray_collect_half

    assert remote_backend("ray") is ray_collect_half


def test_an_unknown_backend_is_one_line():
    with pytest.raises(ConfigError, match=r"^config key 'distributed.backend': unknown backend 'dask' \(use one of "
                                          r"local, ray\)$"):
        remote_backend("dask")


STEPS_PER_FRAGMENT = 16
entered: list[str] = []


@contextmanager
def counting_collect_half(cfg: object, policy: object) -> Iterator[object]:
    """A remote backend whose collectors deliver empty fragments of 16 env steps."""
    entered.append("start")

    def receive(ctx: OnlineRLContext) -> None:
        ctx.trajectories = None
        ctx.env_step += STEPS_PER_FRAGMENT

    try:
        yield receive
    finally:
        entered.append("stop")


def test_train_runs_the_backend_the_table_names(tmp_path, monkeypatch):
    monkeypatch.setitem(REMOTE_BACKENDS, "ray", f"{__name__}:counting_collect_half")
    entered.clear()
    summary = train("cartpole-dqn", tmp_path / "run", overrides=[
        "distributed.backend=ray", "run.max_env_step=48", "run.progress=false", "env.evaluator_env_num=1",
        "env.n_evaluator_episode=1",
    ])
    assert entered == ["start", "stop"]
    assert summary.env_step == 3 * STEPS_PER_FRAGMENT
