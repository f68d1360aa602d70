"""The README's "Using a trained agent" section, docs/environments.md's "A module of your own" and
docs/python-api.md's "Hooks", run as written."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.tiny_run import TINY_RUN

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def code_blocks(section: str, language: str, document: Path = README, level: str = "###") -> list[str]:
    """The ``language`` code blocks of ``document``'s section headed ``{level} section``, up to the next heading."""
    text = document.read_text()
    start = text.index(f"{level} {section}\n")
    end = min(i for i in (text.find("\n## ", start + len(level)), text.find("\n### ", start + len(level)), len(text))
              if i >= 0)
    return re.findall(rf"```{language}\n(.*?)```", text[start:end], flags=re.S)


def test_using_a_trained_agent_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (block,) = code_blocks("Using a trained agent", "python")
    exec(compile(block, "README: Using a trained agent", "exec"), {})
    assert (tmp_path / "runs" / "my-agent" / "ckpt" / "final.pth.tar").is_file()


def test_hooks_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (block,) = code_blocks("Hooks", "python", ROOT / "docs" / "python-api.md", level="##")
    exec(compile(block, "docs/python-api.md: Hooks", "exec"), {})
    assert (tmp_path / "runs" / "hooked" / "ckpt" / "final.pth.tar").is_file()


def test_your_own_environment_runs_as_written_through_the_console_script(tmp_path):
    """docs/environments.md's ``my_envs.py`` and its commands, verbatim but for a tiny budget appended, run
    through the installed ``rlpipe`` console script from the folder that holds ``my_envs.py``.

    The venv's editable install points at the main checkout, so ``PYTHONPATH`` holds this
    checkout's root (and nothing else) to test this code; the temporary folder is not on it:
    ``my_envs`` must be found because it is in the current directory."""
    guide = ROOT / "docs" / "environments.md"
    (module,) = code_blocks("A module of your own", "python", guide, level="##")
    (commands,) = code_blocks("A module of your own", "bash", guide, level="##")
    (tmp_path / "my_envs.py").write_text(module)
    script = Path(sys.executable).parent / "rlpipe"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    budget = {"train": [*TINY_RUN, "run.save_freq=20"], "eval": [], "resume": ["run.max_env_step=400", "--no-progress"]}
    ran = []
    for line in commands.replace("\\\n", " ").splitlines():
        for command in line.split("&&"):
            args = shlex.split(command)
            assert args[0] == "rlpipe"
            done = subprocess.run([str(script), *args[1:], *budget[args[1]]], cwd=tmp_path, env=env,
                                  capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            ran.append(args[1])
            if args[1] == "resume":
                assert json.loads(done.stdout.strip().splitlines()[-1])["env_step"] >= 400
    assert ran == ["train", "train", "eval", "resume"]
    assert (tmp_path / "runs" / "corridor" / "summary.json").is_file()
    assert (tmp_path / "runs" / "corridor-20" / "summary.json").is_file()
