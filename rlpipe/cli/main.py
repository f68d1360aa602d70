"""``rlpipe`` command line: train, resume, eval, presets, config show, plot, tune, sweep, report, export, dataset.

Errors a user can fix (a config key, a preset name, a file) are printed as one line and
exit with status 2; anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rlpipe.config import ConfigError, load_config, preset_names
from rlpipe.errors import RlpipeError
from rlpipe.tools.report_options import add_report_arguments

if TYPE_CHECKING:
    from rlpipe.entry.summary import RunSummary

USER_ERRORS: tuple[type[Exception], ...] = (RlpipeError, FileNotFoundError)
ALLOW_UNSEALED_HELP = ("load checkpoints without a seal (written before rlpipe sealed them), unverified: nothing "
                       "checks that they and their buffer were not changed")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlpipe", description="Off-policy RL as a pipeline of middleware.")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train an agent from a preset or a YAML config")
    train.add_argument("config", help="preset name (see `rlpipe presets`) or path to a YAML config")
    train.add_argument("overrides", nargs="*", help="dotted overrides, e.g. seed=1 policy.learn.batch_size=128")
    train.add_argument("--run-dir", type=Path, help="where to write the run (default runs/<exp_name>-seed<seed>)")
    train.add_argument("--overwrite", action="store_true",
                       help="start again in a run directory that holds a run (its files are removed first)")
    train.add_argument("--overwrite-empty", action="store_true",
                       help="start again in a run directory whose run stopped before its first checkpoint")
    train.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    train.add_argument("--backend", choices=("local", "ray"), default=None,
                       help="local: one process (default); ray: collector actors on Ray feed this process's learner")
    train.add_argument("--collectors", type=_positive_int, default=None,
                       help="collector actors with --backend ray (distributed.collectors)")
    train.add_argument("--address", default=None,
                       help="a running Ray cluster's address (ray start --head) with --backend ray")

    resume = sub.add_parser("resume", help="continue a run from its latest checkpoint and saved buffer")
    resume.add_argument("run_dir", type=Path)
    resume.add_argument("overrides", nargs="*", help="dotted overrides, e.g. run.max_env_step=100000")
    resume.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    resume.add_argument("--allow-unsealed", action="store_true", help=ALLOW_UNSEALED_HELP)

    evaluate = sub.add_parser("eval", help="evaluate a trained run's best (or final) checkpoint")
    evaluate.add_argument("run_dir", type=Path)
    evaluate.add_argument("--episodes", type=_positive_int, default=None,
                          help="episodes (default env.n_evaluator_episode)")
    evaluate.add_argument("--checkpoint", default=None,
                          help="best, final or a checkpoint file (default: best, else final)")
    evaluate.add_argument("--allow-unsealed", action="store_true", help=ALLOW_UNSEALED_HELP)
    evaluate.add_argument("--video", type=Path, default=None,
                          help="record the episodes, played one at a time, to this .gif or .mp4 file")

    presets = sub.add_parser("presets", help="the built-in presets: algorithm, env, budget and what each is")
    presets.add_argument("--family", default=None,
                         help="only presets on envs of this family (atari, minatar, minigrid, popgym, robotics, "
                              "gymnasium)")

    config = sub.add_parser("config", help="inspect configs")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    show = config_sub.add_parser(
        "show", help="the keys of a preset or YAML config that its algorithm reads: type, value, default, meaning"
    )
    show.add_argument("config", help="preset name or path to a YAML config")
    show.add_argument("overrides", nargs="*", help="dotted overrides applied first, e.g. seed=1")

    plot = sub.add_parser("plot", help="plot evaluation return against env steps for one or more runs")
    plot.add_argument("run_dirs", type=Path, nargs="+")
    plot.add_argument("--out", type=Path, default=Path("learning_curve.png"))
    plot.add_argument("--title", default=None)
    plot.add_argument("--ylabel", default=None, help="e.g. 'success rate' for bit flip (default: the metric's name)")
    plot.add_argument("--metric", default=None,
                      help="key of metrics.jsonl to draw (default: the run's evaluation figure, return_mean or "
                      "success_rate): train_success_rate, "
                      "train_episode_return_mean, intrinsic_reward_mean, ...")
    plot.add_argument("--group", action="store_true",
                      help="one mean curve per group of runs (names that differ only by -seedN, else the same "
                      "exp_name) with a shaded band, on a common env-step grid")
    plot.add_argument("--band", choices=("se", "minmax"), default="se",
                      help="with --group: the band is the standard error of the mean (se) or min to max")

    tune = sub.add_parser("tune", help="search hyperparameters with Optuna (TPE, median pruning; the tune extra)")
    tune.add_argument("config", help="preset name or path to a YAML config")
    tune.add_argument("overrides", nargs="*", metavar="key=...",
                      help="key=low:high (floats, log scale when high/low >= 100; ints when both are), "
                      "key=log:low:high, key=[a,b,c] (choices), or key=value (fixed in every trial)")
    tune.add_argument("--trials", type=_positive_int, required=True,
                      help="finished trials the study should have (run again to continue an interrupted study)")
    tune.add_argument("--jobs", type=_positive_int, default=1, help="trials run at once, each in its own process")
    tune.add_argument("--study-dir", type=Path, default=None,
                      help="where the study (study.db), the trials' runs and best.yaml go (default tunes/<exp_name>)")
    tune.add_argument("--seed", type=int, default=None, help="seed of the TPE sampler (default: the config's seed)")

    sweep = sub.add_parser("sweep", help="train presets x seeds, each an ordinary run, on local processes or Ray")
    sweep.add_argument("presets", nargs="+", metavar="PRESET_OR_OVERRIDE",
                       help="preset names (or YAML configs), then dotted overrides for every run, "
                       "e.g. run.max_env_step=1e5")
    sweep.add_argument("--seeds", required=True, help="seeds: 0-9, 0,3,5 or 0-4,10")
    sweep.add_argument("--out", type=Path, required=True,
                       help="the sweep's directory (run the same command again to continue it)")
    sweep.add_argument("--jobs", type=_positive_int, default=1, help="runs at once (one torch thread each)")
    sweep.add_argument("--backend", choices=("local", "ray"), default="local",
                       help="local: processes on this machine; ray: one Ray task per run")
    sweep.add_argument("--address", default=None, help="a running Ray cluster's address with --backend ray")
    sweep.add_argument("--label", default=None,
                       help="groups are named <preset>:<label> (to report the same preset under other overrides)")
    sweep.add_argument("--final-episodes", type=_positive_int, default=None,
                       help="evaluate each final policy over this many episodes after training (its final figure)")

    report = sub.add_parser("report", help="means, medians and IQMs of runs with 95%% bootstrap intervals, "
                            "thresholds, comparisons and curves")
    add_report_arguments(report)
    report.add_argument("--out", type=Path, default=None, help="also write report.md, report.json and curves.png here")
    report.add_argument("--docs", type=Path, default=None,
                        help="instead: rewrite the report blocks of this markdown file from their results files")
    report.add_argument("--check", action="store_true",
                        help="with --docs: change nothing, fail when a block differs from what its files give")

    sb3 = sub.add_parser("import-sb3", help="append a Stable-Baselines3 run (its EvalCallback log) to a results file")
    sb3.add_argument("log_dir", type=Path, help="the EvalCallback's log_path (holding evaluations.npz)")
    sb3.add_argument("--group", required=True, help="the group it reports under, e.g. sb3-dqn")
    sb3.add_argument("--task", required=True, help="the env id it trained on, e.g. MinAtar/Breakout-v1")
    sb3.add_argument("--seed", type=int, required=True)
    sb3.add_argument("--algorithm", default=None, help="the algorithm, for the report's settings")
    sb3.add_argument("--out", type=Path, required=True, help="the results file (.jsonl) to append to")

    _dataset_parser(sub)

    export = sub.add_parser("export", help="write a run's acting network as ONNX or TorchScript (the export extra)")
    export.add_argument("run", type=Path, help="run directory (its best, else final checkpoint) or checkpoint file")
    export.add_argument("--format", choices=("onnx", "torchscript"), default="onnx")
    export.add_argument("--out", type=Path, required=True, help="file to write, e.g. policy.onnx")
    return parser


def _dataset_parser(sub: argparse._SubParsersAction) -> None:
    """``rlpipe dataset from-run | rollout | mix | info | to-minari | from-minari``."""
    dataset = sub.add_parser("dataset", help="make, mix and inspect datasets for offline training; Minari's too")
    commands = dataset.add_subparsers(dest="dataset_command", required=True)

    def made(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--out", type=Path, required=True, help="the dataset directory to write")
        parser.add_argument("--overwrite", action="store_true", help="replace a dataset already at --out")
        parser.add_argument("--random-return", type=float, default=None,
                            help="a random policy's mean return (normalised score 0), with --expert-return")
        parser.add_argument("--expert-return", type=float, default=None,
                            help="an expert's mean return (normalised score 100), with --random-return")

    from_run = commands.add_parser("from-run", help="a run's saved replay buffer as a dataset (medium-replay)")
    from_run.add_argument("run", type=Path, help="run directory (its latest checkpoint's buffer)")
    made(from_run)
    rollout = commands.add_parser("rollout", help="episodes played by a trained run's policy, or at random")
    rollout.add_argument("source", help="run directory or checkpoint; with --random also a preset or config")
    rollout.add_argument("--episodes", type=_positive_int, required=True, help="whole episodes to record")
    rollout.add_argument("--eps", type=float, default=0.0, help="random-action probability (discrete actions)")
    rollout.add_argument("--noise", type=float, default=0.0, help="Gaussian action noise std (continuous actions)")
    rollout.add_argument("--sample", action="store_true",
                         help="sample the actions as the policy explores (sac, iql: stochastic policies)")
    rollout.add_argument("--random", action="store_true", help="act uniformly at random (no policy)")
    rollout.add_argument("--seed", type=int, default=0, help="seed of the envs and the exploration")
    rollout.add_argument("--envs", type=_positive_int, default=8, help="envs played at once")
    made(rollout)
    mix = commands.add_parser("mix", help="two datasets' episodes in a ratio (medium-expert: 0.5)")
    mix.add_argument("first", type=Path)
    mix.add_argument("second", type=Path)
    mix.add_argument("--ratio", type=float, default=0.5, help="the first dataset's share of the rows")
    made(mix)
    info = commands.add_parser("info", help="size, spaces, episodes, returns and provenance of a dataset")
    info.add_argument("dataset", help="dataset directory, or a Minari dataset (minari:ID or its directory)")
    to_minari = commands.add_parser("to-minari", help="write a dataset as a Minari dataset (the offline extra)")
    to_minari.add_argument("dataset", type=Path)
    to_minari.add_argument("--id", required=True, help="the Minari dataset id, e.g. rlpipe/hopper-medium-v0")
    to_minari.add_argument("--root", type=Path, default=None,
                           help="minari's local store to write to (default: MINARI_DATASETS_PATH or ~/.minari)")
    from_minari = commands.add_parser("from-minari", help="a Minari dataset as an rlpipe dataset (the offline extra)")
    from_minari.add_argument("source", help="minari:ID (minari's local store) or a Minari dataset's directory")
    made(from_minari)


def _announce(line: str) -> None:
    """The run's first line of output (its last is the JSON summary): what trains where."""
    print(line, flush=True)


def _cmd_train(args: argparse.Namespace) -> int:
    from rlpipe.entry.options import TrainOptions
    from rlpipe.entry.train import default_run_dir, run_training

    overrides = [*args.overrides, *(["run.progress=false"] if args.no_progress else []), *_distributed_overrides(args)]
    cfg = load_config(args.config, overrides)
    _check_ray_flags(args, cfg.distributed.backend)
    run_dir = args.run_dir or default_run_dir(cfg)
    options = TrainOptions(run_dir=run_dir, overwrite=args.overwrite, overwrite_empty=args.overwrite_empty,
                           announce=_announce)
    return _finish("train", run_dir, run_training(cfg, options))


def _distributed_overrides(args: argparse.Namespace) -> list[str]:
    """``--backend``, ``--collectors`` and ``--address`` as the ``distributed.*`` overrides they stand for."""
    flags = {"backend": args.backend, "collectors": args.collectors, "address": args.address}
    return [f"distributed.{key}={value}" for key, value in flags.items() if value is not None]


def _check_ray_flags(args: argparse.Namespace, backend: str) -> None:
    """``--collectors`` and ``--address`` mean something only to the Ray backend: refuse them, in one
    line, rather than train in one process as if they had not been given."""
    for flag, value in {"collectors": args.collectors, "address": args.address}.items():
        if value is not None and backend != "ray":
            raise ConfigError(f"--{flag} needs --backend ray (or distributed.backend=ray in the config); "
                              f"the backend is '{backend}'")


def _finish(command: str, run_dir: Path, summary: RunSummary) -> int:
    """Print the JSON summary; after a stop by signal, also one line on stderr and its exit status."""
    print(json.dumps({"run_dir": str(run_dir), **summary.__dict__}))
    if summary.stopped_by is None:
        return 0
    print(f"rlpipe {command}: stopped by {summary.stopped_by} at env step {summary.env_step}; the final "
          f"checkpoint is saved: continue with `rlpipe resume {run_dir}`", file=sys.stderr)
    return 128 + signal.Signals[summary.stopped_by].value


def _cmd_resume(args: argparse.Namespace) -> int:
    from rlpipe.entry.options import TrainOptions
    from rlpipe.entry.train import run_training

    config_path = args.run_dir / "config.yaml"
    if not config_path.is_file():
        raise FileNotFoundError(f"{args.run_dir} is not a run directory (no config.yaml)")
    overrides = [*args.overrides, *(["run.progress=false"] if args.no_progress else [])]
    options = TrainOptions(run_dir=args.run_dir, resume=True, allow_unsealed=args.allow_unsealed, announce=_announce)
    return _finish("resume", args.run_dir, run_training(load_config(config_path, overrides), options))


def _cmd_eval(args: argparse.Namespace) -> int:
    from rlpipe.entry.evaluate import evaluate_run

    result = evaluate_run(args.run_dir, args.episodes, args.checkpoint, allow_unsealed=args.allow_unsealed,
                          video=args.video)
    print(json.dumps(result))
    return 0


def _cmd_presets(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from rlpipe.envs.families import env_families, family_of

    families = [family.name for family in env_families()]
    if args.family is not None and args.family not in families:
        raise ConfigError(f"--family: no env family '{args.family}' (families: {', '.join(families)})")
    table = Table("preset", "algorithm", "env", "env steps", "what it is", title="rlpipe presets")
    for name in preset_names():
        cfg = load_config(name)
        if args.family is None or family_of(cfg.env.env_id).name == args.family:
            table.add_row(name, cfg.policy.type, cfg.env.env_id, f"{cfg.run.max_env_step:,}", cfg.description)
    Console(width=None if sys.stdout.isatty() else 200).print(table)
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from rlpipe.config.describe import REQUIRED, describe_config

    cfg = load_config(args.config, args.overrides)
    title = escape(f"config {args.config} (the keys policy.type '{cfg.policy.type}' reads)")
    table = Table("key", "type", "value", "default", "description", title=title)
    for info in describe_config(cfg):
        value = escape(repr(info.value))
        table.add_row(escape(info.key), escape(info.type), f"[bold]{value}[/bold]" if info.value != info.default
                      else value, escape(info.default if info.default is REQUIRED else repr(info.default)),
                      escape(info.description))
    Console(width=None if sys.stdout.isatty() else 200).print(table)
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from rlpipe.utils.plot import plot_runs

    out = plot_runs(args.run_dirs, args.out, title=args.title, ylabel=args.ylabel, metric=args.metric,
                    band=args.band if args.group else None)
    print(out)
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from rlpipe.tools.search_space import split_arguments
    from rlpipe.tools.tune import TuneStoppedError, tune

    space, fixed = split_arguments(args.overrides)
    try:
        result = tune(args.config, space, args.trials, args.study_dir, fixed, args.jobs, args.seed)
    except TuneStoppedError as err:
        print(f"rlpipe tune: {err}", file=sys.stderr)
        return 128 + signal.Signals[err.signal_name].value
    print(json.dumps(asdict(result)))
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from rlpipe.tools.sweep import Placement, Sweep, SweepStoppedError, parse_seeds, run_sweep

    presets = [arg for arg in args.presets if "=" not in arg]
    overrides = [arg for arg in args.presets if "=" in arg]
    sweep = Sweep(tuple(dict.fromkeys(presets)), tuple(parse_seeds(args.seeds)), tuple(overrides), args.out,
                  args.label, args.final_episodes)
    try:
        run_sweep(sweep, Placement(args.backend, args.jobs, args.address))
    except SweepStoppedError as err:
        print(f"rlpipe sweep: {err}", file=sys.stderr)
        return 128 + signal.Signals[err.signal_name].value
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from rlpipe.tools.report import make_report
    from rlpipe.tools.report_docs import update_report_blocks
    from rlpipe.tools.report_options import options_from

    if args.docs is not None:
        stale = update_report_blocks(args.docs, check=args.check)
        for block in stale:
            print(f"{args.docs}: {'differs from its files' if args.check else 'rewritten'}: {block}")
        return 1 if args.check and stale else 0
    report = make_report(options_from(args))
    print(report.to_markdown(), end="")
    if args.out is not None:
        for path in report.write(args.out):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _cmd_import_sb3(args: argparse.Namespace) -> int:
    from rlpipe.tools.foreign import result_of_sb3
    from rlpipe.tools.results import write_results

    write_results(args.out, [result_of_sb3(args.log_dir, args.group, args.task, args.seed, args.algorithm)])
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from rlpipe.tools.export import export_run

    print(json.dumps(asdict(export_run(args.run, args.out, args.format))))
    return 0


def _reference_returns(args: argparse.Namespace) -> dict[str, float] | None:
    """``--random-return`` and ``--expert-return``, both or neither."""
    given = (args.random_return, args.expert_return)
    if given == (None, None):
        return None
    if None in given or args.random_return == args.expert_return:
        raise ConfigError("--random-return and --expert-return go together, and must differ")
    return {"random": args.random_return, "expert": args.expert_return}


def _cmd_dataset(args: argparse.Namespace) -> int:
    from rlpipe.tools import datasets

    command = args.dataset_command
    if command == "info":
        print(json.dumps(datasets.describe_dataset(args.dataset), indent=1))
        return 0
    if command == "to-minari":
        from rlpipe.data.dataset import Dataset
        from rlpipe.data.dataset.minari_io import write_minari

        print(json.dumps({"minari_dataset": str(write_minari(Dataset.open(args.dataset), args.id, args.root))}))
        return 0
    reference, out, overwrite = _reference_returns(args), args.out, args.overwrite
    if command == "from-run":
        made = datasets.dataset_from_run(args.run, out, reference, overwrite)
    elif command == "rollout":
        made = datasets.rollout_dataset(args.source, out, args.episodes, args.eps, args.noise, args.seed, args.random,
                                        args.envs, reference, overwrite, args.sample)
    elif command == "mix":
        made = datasets.mix_datasets(args.first, args.second, args.ratio, out, reference, overwrite)
    else:
        made = datasets.copy_dataset(args.source, out, reference, overwrite)
    print(json.dumps(datasets.describe_dataset(made.path)))
    return 0


COMMANDS = {
    "train": _cmd_train, "resume": _cmd_resume, "eval": _cmd_eval, "presets": _cmd_presets, "config": _cmd_config,
    "plot": _cmd_plot, "tune": _cmd_tune, "sweep": _cmd_sweep, "report": _cmd_report,
    "import-sb3": _cmd_import_sb3, "export": _cmd_export, "dataset": _cmd_dataset,
}


OVERRIDES_DEST = ("overrides", "presets")
"""Where a command's ``key=value`` overrides go: ``overrides``, or the presets-then-overrides list of
``sweep``."""


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line; ``key=value`` overrides may also stand after options
    (``rlpipe train PRESET --no-progress seed=1``, ``rlpipe sweep PRESET --seeds 0-2 seed=1 --out DIR``),
    which argparse alone rejects."""
    parser = _parser()
    args, extras = parser.parse_known_args(argv)
    late = [arg for arg in extras if "=" in arg and not arg.startswith("-")]
    dest = next((name for name in OVERRIDES_DEST if hasattr(args, name)), None)
    if late and dest is not None:
        setattr(args, dest, [*getattr(args, dest), *late])
        extras = [arg for arg in extras if arg not in late]
    if extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def _import_from_cwd() -> None:
    """Put the current directory first on ``sys.path``, as ``python -m`` does.

    The ``rlpipe`` console script starts with its own ``bin`` folder as ``sys.path[0]``, so
    ``env.env_id=my_envs:Corridor-v0`` would not find ``my_envs.py`` beside the user, while
    ``python -m rlpipe.cli.main`` would. First (not last) so that both launchers resolve a module
    name to the same file; the directory is made absolute so a later ``chdir`` cannot change it.
    """
    cwd = os.getcwd()
    if all(os.path.abspath(entry or os.curdir) != cwd for entry in sys.path):
        sys.path.insert(0, cwd)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    _import_from_cwd()
    args = _parse(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except USER_ERRORS as err:
        print(f"rlpipe {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
