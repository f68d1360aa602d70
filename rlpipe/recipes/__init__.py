"""Recipes that assemble a pipeline from a config: its parts (environments, policy, buffer), the
order of its middleware, and where its collect half runs.

Both the user API (:mod:`rlpipe.entry`) and the remote collectors (:mod:`rlpipe.distributed`)
build on these; neither imports the other.
"""
from rlpipe.recipes.backends import REMOTE_BACKENDS, remote_backend
from rlpipe.recipes.build import Parts, build_parts, make_policy
from rlpipe.recipes.envs import make_env_factory, make_envs, make_vector_env
from rlpipe.recipes.pipeline import INSERTION_POINTS, use_collect_half, use_training_pipeline

__all__ = [
    "INSERTION_POINTS",
    "REMOTE_BACKENDS",
    "Parts",
    "build_parts",
    "make_env_factory",
    "make_envs",
    "make_policy",
    "make_vector_env",
    "remote_backend",
    "use_collect_half",
    "use_training_pipeline",
]
