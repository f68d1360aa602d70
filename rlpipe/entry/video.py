"""Videos of a trained policy: ``rlpipe eval RUN --video out.gif`` (or ``.mp4``).

The evaluation episodes are played one after another in one env made with
``render_mode="rgb_array"`` (for an ALE game, the full-colour screen of the last frame of each
agent step), and every frame the env renders, from each reset to the episode's end, goes into
the file (small screens enlarged, float ones as uint8): an episode of ``T`` steps gives ``T + 1``
frames. GIFs are written by Pillow (which matplotlib brings); MP4s need the ``video`` extra
(imageio and its ffmpeg).
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlpipe.config import Config
from rlpipe.errors import MissingDependencyError, RlpipeError
from rlpipe.framework.middleware import evaluation_actions
from rlpipe.policy import Policy
from rlpipe.recipes.envs import make_env_factory

__all__ = ["MIN_VIDEO_SIDE", "VIDEO_FPS", "VIDEO_SUFFIXES", "VideoError", "record_episodes", "video_writer"]

VIDEO_FPS = 25
"""Frames per second of the files (25: a whole number of GIF's 10 ms ticks per frame)."""
VIDEO_SUFFIXES = (".gif", ".mp4")

Frames = list[np.ndarray]
VideoWriter = Callable[[Frames], None]
"""Writes ``uint8 [H, W, 3]`` frames to the file it was made for."""


class VideoError(RlpipeError, ValueError):
    """A video can't be recorded: an unknown file suffix, or an env that renders no frames."""


def _write_gif(path: Path, frames: Frames) -> None:
    from PIL import Image  # Pillow comes with matplotlib (the plot extra)

    images = [Image.fromarray(frame) for frame in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=1000 // VIDEO_FPS, loop=0)


def _write_mp4(path: Path, frames: Frames) -> None:
    import imageio.v2 as imageio

    writer: Any = imageio.get_writer(path, fps=VIDEO_FPS, macro_block_size=1)  # its ffmpeg writer, untyped
    with writer:
        for frame in frames:
            writer.append_data(frame)


def video_writer(path: Path) -> VideoWriter:
    """The writer of ``path``'s format; one line, before anything is played, for an unknown suffix
    or a missing writer package."""
    suffix = path.suffix.lower()
    if suffix == ".gif":
        try:
            import PIL  # noqa: F401 (checked here, used by the writer)
        except ImportError:
            raise MissingDependencyError(f"--video {path}: GIFs need Pillow: pip install 'rlpipe[plot]' "
                                         "(or 'rlpipe[video]')") from None
        return lambda frames: _write_gif(path, frames)
    if suffix == ".mp4":
        try:
            import imageio  # noqa: F401 (checked here, used by the writer)
            import imageio_ffmpeg  # noqa: F401 (imageio's MP4 backend)
        except ImportError:
            raise MissingDependencyError(f"--video {path}: MP4 files need imageio and imageio-ffmpeg: "
                                         "pip install 'rlpipe[video]'") from None
        return lambda frames: _write_mp4(path, frames)
    raise VideoError(f"--video {path}: unknown video format '{path.suffix}' (use one of {', '.join(VIDEO_SUFFIXES)})")


def rendering_config(cfg: Config) -> Config:
    """``cfg`` with ``env.env_kwargs.render_mode`` set to ``rgb_array``."""
    env_kwargs = {**cfg.env.env_kwargs, "render_mode": "rgb_array"}
    return cfg.model_copy(update={"env": cfg.env.model_copy(update={"env_kwargs": env_kwargs})})


MIN_VIDEO_SIDE = 160
"""Smaller screens (MinAtar's 10x10) are enlarged by a whole factor, each pixel a block, to at least this."""


def _render(env: gym.Env, env_id: str) -> np.ndarray:
    """``env``'s screen as ``uint8 [H, W, 3]``: float screens in [0, 1] (MinAtar's) scaled to 0-255,
    small ones enlarged to :data:`MIN_VIDEO_SIDE`."""
    frame = env.render()
    if not isinstance(frame, np.ndarray) or frame.ndim != 3:
        raise VideoError(f"env '{env_id}' rendered no rgb_array frame (got {type(frame).__name__}): "
                         "it can't be recorded")
    if np.issubdtype(frame.dtype, np.floating):
        frame = np.clip(frame * 255.0 + 0.5, 0, 255)
    frame = frame.astype(np.uint8, copy=False)
    factor = -(-MIN_VIDEO_SIDE // min(frame.shape[:2]))
    return np.repeat(np.repeat(frame, factor, axis=0), factor, axis=1) if factor > 1 else frame


def _make_rendering_env(cfg: Config) -> gym.Env:
    """One evaluation env of ``cfg`` that renders ``rgb_array`` frames; one line for an env that
    can't (asked before it is made with a ``render_mode`` it may not take)."""
    with closing(make_env_factory(cfg)()) as plain:
        modes = list(plain.metadata.get("render_modes", ()))
    if "rgb_array" not in modes:
        raise VideoError(f"env '{cfg.env.env_id}' has no rgb_array rendering (render modes {modes}): "
                         "it can't be recorded")
    return make_env_factory(rendering_config(cfg))()


def record_episodes(cfg: Config, policy: Policy, episodes: int, seed: int, writer: VideoWriter) -> dict[str, Any]:
    """Play ``episodes`` episodes of ``policy``'s evaluation actions (greedy, or epsilon-greedy with
    ``policy.eval.eps``) in one rendering env of ``cfg`` (the first reset seeded with ``seed``),
    write their frames with ``writer``, and return ``episode_return`` and ``episode_length``
    arrays and the number of ``frames`` written."""
    env = _make_rendering_env(cfg)
    act = evaluation_actions(policy.eval_mode, cfg.policy.eval.eps)
    frames: Frames = []
    returns, lengths = [], []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed if episode == 0 else None)
            frames.append(_render(env, cfg.env.env_id))
            episode_return, length, done = 0.0, 0, False
            while not done:
                action = act(np.asarray(obs)[None])[0]
                obs, reward, terminated, truncated, _ = env.step(action)
                frames.append(_render(env, cfg.env.env_id))
                episode_return += float(reward)
                length += 1
                done = bool(terminated or truncated)
            returns.append(episode_return)
            lengths.append(length)
    finally:
        env.close()
    writer(frames)
    return {"episode_return": np.asarray(returns), "episode_length": np.asarray(lengths), "frames": len(frames)}
