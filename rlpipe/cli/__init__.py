"""The ``rlpipe`` command line."""
