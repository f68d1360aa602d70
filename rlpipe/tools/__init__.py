"""Tools around finished or repeated runs: hyperparameter search (:mod:`rlpipe.tools.tune`, the
``tune`` extra), export of the acting network for deployment without rlpipe
(:mod:`rlpipe.tools.export`, the ``export`` extra), sweeps of presets x seeds on local processes or
Ray (:mod:`rlpipe.tools.sweep`) and reports with intervals (:mod:`rlpipe.tools.report`, the
``report`` extra), both on run results (:mod:`rlpipe.tools.results`).

They sit above :mod:`rlpipe.entry` (they call ``train`` and ``load`` as a user would) and
nothing in the library imports them, so the core never needs their extras.
"""
