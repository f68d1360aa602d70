"""Entry points that assemble whole pipelines from a config."""
from rlpipe.entry.api import TrainResult, train
from rlpipe.entry.options import TrainOptions
from rlpipe.entry.summary import RunSummary
from rlpipe.entry.train import default_run_dir

__all__ = ["RunSummary", "TrainOptions", "TrainResult", "default_run_dir", "train"]
