"""Entry points that assemble whole pipelines from a config."""
from rlpipe.entry.summary import RunSummary
from rlpipe.entry.train import default_run_dir, train

__all__ = ["RunSummary", "default_run_dir", "train"]
