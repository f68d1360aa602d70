"""Beyond one process: collector actors on Ray feeding one learner (``distributed.backend=ray``).

:class:`CollectorHalf` and :class:`Fragment` need nothing but rlpipe; the Ray side
(:func:`ray_session`, :class:`RayCollectors`, :func:`fragment_receiver`) imports Ray only when used.
:func:`ray_collect_half` is the backend :mod:`rlpipe.recipes.backends` finds for ``distributed.backend=ray``.
"""
from rlpipe.distributed.backend import ray_collect_half
from rlpipe.distributed.cluster import import_ray, ray_session
from rlpipe.distributed.collector_half import COLLECTOR_SEED_STRIDE, CollectorHalf
from rlpipe.distributed.fragment import Fragment
from rlpipe.distributed.ray_collectors import CollectorLostError, RayCollectors, fragment_receiver

__all__ = [
    "COLLECTOR_SEED_STRIDE", "CollectorHalf", "CollectorLostError", "Fragment", "RayCollectors",
    "fragment_receiver", "import_ray", "ray_collect_half", "ray_session",
]
