"""The README's "Using a trained agent" and "Your own environment" sections run as written."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def code_blocks(section: str, language: str) -> list[str]:
    """The ``language`` code blocks of the README section headed ``### section``."""
    text = README.read_text()
    start = text.index(f"### {section}\n")
    end = min(i for i in (text.find("\n## ", start), text.find("\n### ", start + 4), len(text)) if i >= 0)
    return re.findall(rf"```{language}\n(.*?)```", text[start:end], flags=re.S)


def test_using_a_trained_agent_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (block,) = code_blocks("Using a trained agent", "python")
    exec(compile(block, "README: Using a trained agent", "exec"), {})
    assert (tmp_path / "runs" / "my-agent" / "ckpt" / "final.pth.tar").is_file()


def test_your_own_environment_runs_as_written(tmp_path):
    (module,) = code_blocks("Your own environment", "python")
    (commands,) = code_blocks("Your own environment", "bash")
    (tmp_path / "my_envs.py").write_text(module)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for line in commands.replace("\\\n", " ").splitlines():
        for command in line.split("&&"):
            args = shlex.split(command)
            assert args[0] == "rlpipe"
            subprocess.run([sys.executable, "-m", "rlpipe.cli.main", *args[1:]], cwd=tmp_path, env=env, check=True,
                           capture_output=True)
    assert (tmp_path / "runs" / "corridor" / "summary.json").is_file()
    assert (tmp_path / "runs" / "corridor-20" / "summary.json").is_file()
