"""``rlpipe eval RUN --video out.gif``: the evaluation episodes' rendered frames, written as a video."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageSequence

from rlpipe.cli.main import main
from rlpipe.entry.evaluate import evaluate_run
from rlpipe.entry.video import MIN_VIDEO_SIDE, VIDEO_FPS, VideoError, _render, video_writer
from rlpipe.errors import MissingDependencyError
from tests.tiny_run import TINY_RUN


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("video") / "cartpole"
    assert main(["train", "cartpole-dqn", *TINY_RUN, "--run-dir", str(run_dir)]) == 0
    return run_dir


def test_a_gif_holds_every_rendered_frame_of_the_episodes(cartpole_run, tmp_path, capsys):
    out = tmp_path / "agent.gif"
    assert main(["eval", str(cartpole_run), "--episodes", "2", "--video", str(out)]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["episodes"] == 2 and result["video"] == str(out)
    # CartPole pays 1 a step, so each episode's return is its length: one frame after each reset and each step
    expected_frames = int(result["return_mean"] * 2) + 2
    assert result["video_frames"] == expected_frames
    with Image.open(out) as gif:
        assert gif.size == (600, 400)  # CartPole's rgb_array screen
        durations = [frame.info["duration"] for frame in ImageSequence.Iterator(gif)]
    # Pillow merges a frame equal to the one before into it (its duration grows): time counts every frame
    assert len(durations) <= expected_frames
    assert sum(durations) == expected_frames * (1000 // VIDEO_FPS)


def test_video_episodes_are_the_evaluated_ones(cartpole_run, tmp_path):
    first = evaluate_run(cartpole_run, episodes=1, video=tmp_path / "a.gif")
    again = evaluate_run(cartpole_run, episodes=1, video=tmp_path / "b.gif")
    assert first["return_mean"] == again["return_mean"]  # seeded: the same episode each time
    assert first["video_frames"] == first["return_mean"] + 1


def test_an_unknown_suffix_is_one_line_before_anything_runs(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "no-run"), "--video", str(tmp_path / "out.avi")]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown video format '.avi'" in err and "\n" not in err


def test_a_missing_mp4_writer_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "imageio_ffmpeg", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match=r"rlpipe\[video\]"):
        video_writer(tmp_path / "out.mp4")


def test_an_env_without_rgb_array_rendering_is_one_line(tmp_path, capsys):
    run_dir = tmp_path / "bitflip"
    overrides = ["env.env_kwargs.n_bits=4", "policy.collect.n_episode=2", *TINY_RUN]
    assert main(["train", "bitflip-her-dqn", *overrides, "--run-dir", str(run_dir)]) == 0
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--video", str(tmp_path / "out.gif")]) == 2
    err = capsys.readouterr().err.strip()
    assert "has no rgb_array rendering" in err and "\n" not in err
    assert not (tmp_path / "out.gif").exists()


def test_video_error_is_a_user_error():
    assert issubclass(VideoError, ValueError)


def test_an_mp4_holds_every_frame(cartpole_run, tmp_path):
    import imageio.v2 as imageio  # the test extra installs imageio and imageio-ffmpeg (its ffmpeg binary)

    result = evaluate_run(cartpole_run, episodes=1, video=tmp_path / "agent.mp4")
    reader = imageio.get_reader(tmp_path / "agent.mp4")
    assert sum(1 for _ in reader) == result["video_frames"] == result["return_mean"] + 1
    assert tuple(reader.get_meta_data()["size"]) == (600, 400)
    reader.close()


class _FloatScreen:
    """What MinAtar's ``render`` gives: a 10x10 float screen in [0, 1]."""

    def render(self):
        screen = np.zeros((10, 10, 3))
        screen[0, 0] = 1.0
        return screen


def test_small_float_screens_become_uint8_frames_of_whole_blocks():
    frame = _render(_FloatScreen(), "MinAtar/Breakout-v1")
    assert frame.dtype == np.uint8 and frame.shape == (MIN_VIDEO_SIDE, MIN_VIDEO_SIDE, 3)
    block = MIN_VIDEO_SIDE // 10
    assert (frame[:block, :block] == 255).all() and (frame[block:, :] == 0).all()
