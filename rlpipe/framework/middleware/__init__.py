"""Middleware: collectors, learners, evaluator, checkpoints, logging (seed-compatible names)."""
from rlpipe.framework.middleware.ckpt_handler import (
    BEST_CHECKPOINT,
    BUFFER_SUFFIX,
    CKPT_SUFFIX,
    FINAL_CHECKPOINT,
    CkptSaver,
    SaveSettings,
    buffer_file,
    checkpoint_state,
    has_resume_point,
    latest_checkpoint,
    restore_checkpoint,
)
from rlpipe.framework.middleware.collector import EpisodeCollector, StepCollector, flush_at_finish
from rlpipe.framework.middleware.functional import *  # noqa: F403 - re-export the functional middleware
from rlpipe.framework.middleware.functional import __all__ as _functional_all
from rlpipe.framework.middleware.learner import HERLearner, OffPolicyLearner

__all__ = [
    "BEST_CHECKPOINT",
    "BUFFER_SUFFIX",
    "CKPT_SUFFIX",
    "FINAL_CHECKPOINT",
    "CkptSaver",
    "SaveSettings",
    "buffer_file",
    "checkpoint_state",
    "has_resume_point",
    "latest_checkpoint",
    "restore_checkpoint",
    "EpisodeCollector", "HERLearner", "OffPolicyLearner", "StepCollector", "flush_at_finish", *_functional_all]
