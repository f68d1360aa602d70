"""rlpipe report: per-task aggregates, comparisons, thresholds, normalised aggregates, settings and output files."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rlpipe.cli.main import main
from rlpipe.tools.normalisation import NormalisationError, load_normaliser
from rlpipe.tools.report import build_report
from rlpipe.tools.results import ResultError, RunResult, write_results
from rlpipe.tools.stats import Estimate


def run(group: str, seed: int, finals: list[float], task: str = "CartPole-v1", threshold: float | None = 475.0,
        **settings) -> RunResult:
    steps = [1000 * (i + 1) for i in range(len(finals))]
    return RunResult(group, task, seed, steps, finals, [10.0 * (i + 1) for i in range(len(finals))],
                     eval_episodes=10, threshold=threshold, budget_env_steps=steps[-1],
                     settings={"algorithm": "dqn", "precision": "fp32", "flush_denormal": True, "overrides": [],
                               "resumed": False, **settings})


def results() -> list[RunResult]:
    dqn = [run("dqn", s, [100.0, v]) for s, v in enumerate([200.0, 300.0, 480.0, 500.0])]
    c51 = [run("c51", s, [480.0, v]) for s, v in enumerate([490.0, 500.0, 500.0, 100.0])]
    return dqn + c51


def test_per_task_aggregates_and_their_intervals():
    report = build_report(results())
    dqn = report.rows[0]
    assert (dqn.group, dqn.seeds) == ("dqn", [0, 1, 2, 3])
    assert dqn.final["mean"].value == pytest.approx(370.0)
    assert dqn.final["median"].value == pytest.approx(390.0)
    assert dqn.final["IQM"].value == pytest.approx(390.0)  # the middle two of four: 300 and 480
    assert dqn.best.value == pytest.approx(370.0)
    for estimate in dqn.final.values():
        assert 200.0 <= estimate.low <= estimate.value <= estimate.high <= 500.0


def test_thresholds_count_runs_that_got_there_and_their_median_steps_and_time():
    report = build_report(results())
    dqn, c51 = report.rows
    # dqn reaches 475 at its second evaluation (2,000 steps, 20 s) in seeds 2 and 3 only: half the runs got there
    # by 2,000 steps; the interval's top is "not reached" (a resample may hold three runs that never did)
    assert (dqn.threshold, dqn.reached) == (475.0, 2)
    assert dqn.steps_to_threshold == Estimate(2000.0, 2000.0, np.inf)
    # c51's first evaluation already reaches it on every seed
    assert c51.reached == 4 and (c51.steps_to_threshold.value, c51.wall_to_threshold.value) == (1000.0, 10.0)
    lower = build_report(results(), threshold=150.0).rows[0]
    assert lower.reached == 4 and lower.steps_to_threshold.value == 2000.0


def test_comparison_with_a_baseline():
    report = build_report(results(), baseline="dqn")
    assert report.rows[0].improvement is None
    # c51's finals [490, 500, 500, 100] against dqn's [200, 300, 480, 500]: wins 3+3+3, ties 1+1 (500 = 500), 1 win
    wins = 3 + (3 + 0.5) + (3 + 0.5) + 0
    assert report.rows[1].improvement.value == pytest.approx(wins / 16)
    with pytest.raises(ResultError, match="no group 'sac'"):
        build_report(results(), baseline="sac")


def test_whole_run_wall_times_and_their_ratio_to_the_baseline_only_when_asked():
    def timed(group: str, seed: int, seconds: float | None) -> RunResult:
        result = run(group, seed, [100.0, 200.0])
        result.wall_time_s = [1.0, seconds]
        return result

    ieee = [timed("ieee", s, t) for s, t in enumerate([150.0, 210.0, 180.0])]
    flushed = [timed("ftz", s, t) for s, t in enumerate([100.0, 120.0, 140.0])]
    assert build_report(ieee + flushed, baseline="ftz").rows[0].wall_time is None  # not asked
    report = build_report(ieee + flushed, baseline="ftz", wall_time=True)
    slow, fast = report.rows
    assert slow.wall_time.value == pytest.approx(180.0) and 150.0 <= slow.wall_time.low <= 180.0 <= slow.wall_time.high
    assert slow.wall_time_ratio.value == pytest.approx(1.5)  # 180 s against 120 s
    assert slow.wall_time_ratio.low < 1.5 < slow.wall_time_ratio.high  # each group resampled on its own
    assert fast.wall_time_ratio is None
    text = report.to_markdown()
    assert "| ieee | CartPole-v1 | 3 | 180 s [" in text and "| 1.5x [" in text and "against ftz" in text
    assert report.to_json()["tasks"][0]["wall_time_ratio"]["value"] == pytest.approx(1.5)
    unlogged = build_report([timed("ieee", 0, None), *flushed], baseline="ftz", wall_time=True)
    assert unlogged.rows[0].wall_time is None and "| ieee | CartPole-v1 | 1 | not logged |" in unlogged.to_markdown()


def test_runs_known_by_their_final_figure_alone_have_no_best_threshold_or_curve(tmp_path):
    def final_only(seed: int, final: float) -> RunResult:
        result = run("peer", seed, [final])
        result.env_step, result.wall_time_s, result.curve = [2000], [300.0], False
        return result

    peer = [final_only(s, v) for s, v in enumerate([480.0, 490.0, 500.0])]
    report = build_report([*results()[:4], *peer], baseline="dqn", wall_time=True)
    dqn, row = report.rows
    assert row.final["mean"].value == pytest.approx(490.0) and row.improvement is not None
    # its one figure is at the end of training: it must not pass for a best evaluation or a threshold reached
    assert row.best is None and not row.curve and row.reached == 0 and row.steps_to_threshold is None
    assert dqn.curve and dqn.best is not None and dqn.reached == 2
    assert row.wall_time.value == pytest.approx(300.0)  # the whole run's time is still known
    text = report.to_markdown()
    assert "| peer | CartPole-v1 | 3 | 490 [" in text and "| no curve | 0.75 [" in text
    assert "| peer | CartPole-v1 | 475 | no curve |  |  |" in text
    data = report.to_json()["tasks"][1]
    assert (data["curve"], data["best_mean"]) == (False, None)
    report.write(tmp_path / "out")  # its curves leave the peer out
    assert (tmp_path / "out" / "curves.png").is_file()


def test_normalised_aggregates_pool_games_and_resample_each_game_on_its_own():
    atari = [run("der", s, [v], task=task, threshold=None) for task, scores in
             {"ALE/Pong-v5": [-20.7, 14.6], "ALE/Boxing-v5": [0.1, 12.1]}.items() for s, v in enumerate(scores)]
    report = build_report(atari, normaliser=load_normaliser("atari"))
    (aggregate,) = report.aggregates
    assert (aggregate.tasks, aggregate.runs) == (2, 4)
    assert aggregate.final["mean"].value == pytest.approx(0.5)  # normalised [0, 1] on both games
    assert aggregate.final["IQM"].value == pytest.approx(0.5)
    with pytest.raises(NormalisationError, match="no scores for task 'CartPole-v1'"):
        build_report(results(), normaliser=load_normaliser("atari"))


def test_a_normalisation_file(tmp_path):
    path = tmp_path / "norm.yaml"
    path.write_text("CartPole-v1: {low: 0, high: 500}\n")
    report = build_report(results(), normaliser=load_normaliser(str(path)))
    assert report.aggregates[0].final["mean"].value == pytest.approx(370.0 / 500.0)
    assert load_normaliser(str(path)).name == "norm.yaml"  # a report reads the same from any folder
    path.write_text("CartPole-v1: {low: 0}\n")
    with pytest.raises(NormalisationError, match="task 'CartPole-v1' needs low and high"):
        load_normaliser(str(path))


def test_a_group_may_not_mix_settings_or_repeat_a_seed():
    with pytest.raises(ResultError, match="group 'dqn' mixes runs whose precision differ"):
        build_report([run("dqn", 0, [1.0]), run("dqn", 1, [1.0], precision="bf16-mixed")])
    with pytest.raises(ResultError, match="group 'dqn' has seed 0 on CartPole-v1 twice"):
        build_report([run("dqn", 0, [1.0]), run("dqn", 0, [2.0])])


def test_runs_of_several_machines_count_for_returns_but_not_for_wall_times():
    """A group may hold runs of several machines (a Ray sweep over mixed nodes): its finals are any seeds'
    finals, but wall times, to the threshold, whole runs and their ratio, compare only on one machine."""
    xeon, epyc = "Intel Xeon, 2 cores, AVX512", "AMD EPYC, 2 cores, AVX2"
    mixed = [run("dqn", 0, [480.0, 500.0], machine=xeon), run("dqn", 1, [480.0, 490.0], machine=epyc)]
    alone = [run("c51", s, [480.0, 500.0], machine=epyc) for s in range(2)]
    report = build_report(mixed + alone, baseline="c51", wall_time=True)
    dqn, c51 = report.rows
    assert dqn.final["mean"].value == 495.0 and dqn.reached == 2
    assert dqn.wall_to_threshold is None and dqn.wall_time is None and dqn.wall_time_ratio is None
    assert c51.wall_to_threshold is not None and c51.wall_time is not None
    text = report.to_markdown()
    assert "| dqn | CartPole-v1 | 475 | 2/2 | 1,000 [1,000, 1,000] | other machines |" in text
    assert "| dqn | CartPole-v1 | 2 | other machines | other machines |" in text
    assert "| overrides | code | machine |" in text
    assert f"| {epyc} / {xeon} |" in text and f"| {epyc} |" in text
    # one machine each, but not the same: no ratio between them
    report = build_report([run("dqn", s, [500.0], machine=xeon) for s in range(2)] + alone, baseline="c51",
                          wall_time=True)
    assert report.rows[0].wall_time is not None and report.rows[0].wall_time_ratio is None
    assert "| dqn | CartPole-v1 | 2 | 10 s [10 s, 10 s] | other machines |" in report.to_markdown()
    # records from before runs recorded their machine: one unknown machine, no column, wall times as before
    assert "machine" not in build_report(results()).to_markdown()
    assert build_report(results(), wall_time=True).rows[0].wall_time is not None


def test_markdown_json_and_curves(tmp_path):
    report = build_report(results(), baseline="dqn")
    text = report.to_markdown()
    assert "| dqn | CartPole-v1 | 4 | 370 [" in text and "P(> dqn)" in text
    assert "| c51 | rlpipe | dqn | last evaluation, 10 episodes | fp32 | True | 2,000 | 0/4 |" in text
    assert "95% stratified percentile-bootstrap interval" in text
    paths = report.write(tmp_path / "out")
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["tasks"][1]["p_improvement"]["value"] == pytest.approx(report.rows[1].improvement.value)
    assert (tmp_path / "out" / "curves.png").stat().st_size > 1000 and len(paths) == 3
    assert build_report(results(), baseline="dqn").to_markdown() == text  # seeded: the same files, the same report


def test_the_command_prints_the_report_and_names_bad_input_in_one_line(tmp_path, capsys):
    path = tmp_path / "results.jsonl"
    write_results(path, results())
    assert main(["report", str(path), "--baseline", "dqn"]) == 0
    assert "| c51 | CartPole-v1 | 4 |" in capsys.readouterr().out
    assert main(["report", str(path), "--normalise", "nope"]) == 2
    error = capsys.readouterr().err.strip()
    assert error == "rlpipe report: error: --normalise: 'nope' is not atari, minatar or a file"


BLOCK = """# Results

<!-- rlpipe report results.jsonl --baseline dqn --group dqn --group c51 --plot curves.png -->
stale table
<!-- end report -->

Text between blocks stays.

<!-- rlpipe report results.jsonl --group c51 -->
<!-- end report -->
"""


def test_docs_blocks_are_rewritten_from_their_files_and_checked(tmp_path, capsys):
    write_results(tmp_path / "results.jsonl", results())
    doc = tmp_path / "results.md"
    doc.write_text(BLOCK)
    assert main(["report", "--docs", str(doc), "--check"]) == 1
    assert doc.read_text() == BLOCK and "differs from its files" in capsys.readouterr().out
    assert main(["report", "--docs", str(doc)]) == 0
    text = doc.read_text()
    assert build_report(results(), baseline="dqn").to_markdown() in text and "Text between blocks stays." in text
    assert (tmp_path / "curves.png").is_file()
    assert main(["report", "--docs", str(doc), "--check"]) == 0
    doc.write_text(text.replace("| dqn | CartPole-v1 | 4 | 370", "| dqn | CartPole-v1 | 4 | 371"))
    assert main(["report", "--docs", str(doc), "--check"]) == 1


def test_a_docs_block_with_bad_arguments_is_named(tmp_path, capsys):
    doc = tmp_path / "results.md"
    doc.write_text("<!-- rlpipe report missing.jsonl -->\n<!-- end report -->\n")
    assert main(["report", "--docs", str(doc)]) == 2
    assert "report block 'missing.jsonl': " in capsys.readouterr().err
    doc.write_text("no blocks\n")
    assert main(["report", "--docs", str(doc)]) == 2
    assert "has no report block" in capsys.readouterr().err
