"""The table of encoders: every name ``policy.model.encoder`` (and ``reward_model.encoder``) takes.

An encoder is the first part of every network: it reads the observations (in their own dtype,
on the policy's device) and returns float32 features. Each built-in one is a row here, its
builder named by import path (as :mod:`rlpipe.config.algorithms` names policy classes), so the
config reads the names without importing torch; :func:`rlpipe.model.encoders.make_encoder`
builds what a row names. A user's encoder needs no row: ``package.module:Class`` names a class
taking ``(observation_space, **encoder_kwargs)``, an ``nn.Module`` with an ``n_features``
attribute, as Stable-Baselines3's ``features_extractor_class`` with its ``features_extractor_kwargs``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["AUTO", "ENCODERS", "EncoderRow", "check_encoder_name", "encoder_names", "is_import_path"]

AUTO = "auto"
"""Choose the encoder from the observation space (:func:`rlpipe.model.encoders.encoder_kind`)."""


@dataclass(frozen=True)
class EncoderRow:
    """One built-in encoder: its builder ``(observation_space, settings) -> (encoder, n_features)``
    by import path, and what it reads (for messages and ``rlpipe config show``)."""

    builder: str
    reads: str


ENCODERS: dict[str, EncoderRow] = {
    "mlp": EncoderRow("rlpipe.model.encoders:mlp_encoder",
                      "vectors: Box (flattened), MultiBinary, Discrete and MultiDiscrete (one-hot), dicts of them"),
    "nature_cnn": EncoderRow("rlpipe.model.encoders:nature_cnn_encoder",
                             "channels-first integer images [C, H, W] of at least 36x36 pixels (Atari)"),
    "minatar_cnn": EncoderRow("rlpipe.model.encoders:minatar_cnn_encoder",
                              "channels-first integer images [C, H, W] of at least 3x3 pixels (MinAtar)"),
}
"""The built-in encoders by name."""

IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def is_import_path(name: str) -> bool:
    """Whether ``name`` is ``package.module:Class`` (a user's encoder) rather than a built-in name."""
    return bool(IMPORT_PATH.match(name))


def encoder_names() -> tuple[str, ...]:
    """What ``policy.model.encoder`` takes by name: ``auto`` and the built-in encoders."""
    return (AUTO, *ENCODERS)


def check_encoder_name(name: str) -> str:
    """``name`` if it is a built-in encoder, ``auto`` or an import path; else a one-line ``ValueError``."""
    if name in encoder_names() or is_import_path(name):
        return name
    raise ValueError(f"unknown encoder {name!r}: use one of {', '.join(encoder_names())}, or package.module:Class "
                     "for an encoder of your own")
