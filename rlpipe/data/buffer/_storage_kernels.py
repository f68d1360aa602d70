"""Compiled (numba) id -> slot lookup of :class:`~rlpipe.data.buffer.storage.RingStorage`.

Importing this module needs numba; ``storage`` falls back to numpy without it. One pass
instead of six numpy calls (and a seventh to count the hits): a priority-replay round looks
ids up several times, and at a batch of 256 the numpy calls' fixed costs are most of the lookup.
"""

import numba


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
