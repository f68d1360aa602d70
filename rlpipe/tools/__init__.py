"""Tools around finished or repeated runs, each behind an optional extra: hyperparameter search
(:mod:`rlpipe.tools.tune`, ``rlpipe[tune]``) and export of the acting network for deployment
without rlpipe (:mod:`rlpipe.tools.export`, ``rlpipe[export]``).

They sit above :mod:`rlpipe.entry` (they call ``train`` and ``load`` as a user would) and
nothing in the library imports them, so the core never needs their extras.
"""
