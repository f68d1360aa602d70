"""Compiled (numba) loops of the ring storage: id -> slot lookup and uniform index draws.

Importing this module needs numba; ``storage`` and ``sampling`` fall back to numpy without
it, with the same results bit for bit (a seed gives one run either way). Each is one pass
instead of several numpy calls: at a batch of 64-256 the numpy calls' fixed costs are most
of the work (a priority-replay round looks ids up several times).
"""

import numba
import numpy as np


@numba.njit(cache=True)
def locate(stored_ids, base, ids, slots, exists):
    # returns how many ids name a stored item
    capacity = stored_ids.shape[0]
    found = 0
    for j in range(ids.shape[0]):
        slot = (ids[j] - base) % capacity
        slots[j] = slot
        exists[j] = ids[j] >= base and stored_ids[slot] == ids[j]
        found += exists[j]
    return found


@numba.njit(cache=True)
def scale_to_indices(u, population, distinct, out):
    # out[j] = floor(u[j] * population) for u in [0, 1), the arithmetic of
    # sampling.scale_to_indices (the tests compare both). With ``distinct``, returns False at
    # the first repeated index (an open-addressing table of at least 2 slots per draw).
    size = 2
    while size < 2 * u.shape[0]:
        size *= 2
    seen = np.full(size if distinct else 0, -1, dtype=np.int64)
    for j in range(u.shape[0]):
        index = min(np.int64(u[j] * population), population - 1)
        out[j] = index
        if distinct:
            h = (index * 0x9E3779B1) & (size - 1)
            while seen[h] != -1:
                if seen[h] == index:
                    return False
                h = (h + 1) & (size - 1)
            seen[h] = index
    return True
