"""Config loading from presets, files and dicts; one-line errors naming the key."""
from __future__ import annotations

import pytest

from rlpipe.config import Config, ConfigError, dump_config, load_config, parse_override, preset_names


def test_every_preset_loads():
    names = preset_names()
    assert "cartpole-dqn" in names
    for name in names:
        assert isinstance(load_config(name), Config)


def test_a_preset_family_gives_one_preset_per_game_with_its_name_and_env():
    names = preset_names()
    assert not [name for name in names if "{" in name]
    for game, title in [("breakout", "Breakout"), ("spaceinvaders", "SpaceInvaders")]:
        for algo in ("dqn", "rainbow"):
            cfg = load_config(f"minatar-{game}-{algo}")
            assert cfg.exp_name == f"minatar-{game}-{algo}"
            assert cfg.env.env_id == f"MinAtar/{title}-v1"
    assert load_config("minatar-seaquest-rainbow").policy == load_config("minatar-freeway-rainbow").policy
    assert load_config("minatar-asterix-rainbow").policy.nstep == 1  # its game_overrides
    assert load_config("minatar-breakout-rainbow").policy.nstep == 3


@pytest.fixture
def presets_folder(tmp_path, monkeypatch):
    """An empty built-in presets folder, for preset files a test writes."""
    from rlpipe.config import loader

    (tmp_path / "presets").mkdir()
    monkeypatch.setattr(loader.resources, "files", lambda package: tmp_path)
    loader._preset_sources.cache_clear()
    yield tmp_path / "presets"
    monkeypatch.undo()
    loader._preset_sources.cache_clear()


def test_a_preset_family_without_games_is_one_line(presets_folder):
    (presets_folder / "toy-{game}-dqn.yaml").write_text("exp_name: toy-{game}-dqn\n")
    with pytest.raises(ConfigError, match=r"^preset family toy-\{game\}-dqn.yaml: needs a 'games' mapping"):
        preset_names()


def test_a_family_member_named_as_a_preset_file_is_one_line(presets_folder):
    (presets_folder / "toy-{game}-dqn.yaml").write_text("games: {pong: Pong, maze: Maze}\nexp_name: toy-{game}-dqn\n")
    (presets_folder / "toy-maze-dqn.yaml").write_text("exp_name: toy-maze-dqn\n")
    with pytest.raises(ConfigError, match=r"^preset 'toy-maze-dqn' is defined twice: by toy-maze-dqn.yaml and by toy-"):
        preset_names()


def test_a_family_applies_its_game_overrides_to_that_game_only(presets_folder):
    (presets_folder / "toy-{game}-dqn.yaml").write_text(
        "games: {pong: Pong, maze: Maze}\ngame_overrides: {maze: {policy.nstep: 1}}\n"
        "exp_name: toy-{game}-dqn\npolicy: {nstep: 3}\n"
    )
    assert load_config("toy-maze-dqn").policy.nstep == 1
    assert load_config("toy-pong-dqn").policy.nstep == 3


def test_game_overrides_for_a_game_outside_the_family_is_one_line(presets_folder):
    (presets_folder / "toy-{game}-dqn.yaml").write_text(
        "games: {pong: Pong}\ngame_overrides: {maze: {policy.nstep: 1}}\nexp_name: toy-{game}-dqn\n"
    )
    with pytest.raises(ConfigError, match=r"^preset family toy-\{game\}-dqn.yaml: 'game_overrides' names maze, not in"):
        preset_names()


def test_game_overrides_that_are_not_dotted_keys_is_one_line(presets_folder):
    (presets_folder / "toy-{game}-dqn.yaml").write_text(
        "games: {pong: Pong}\ngame_overrides: {pong: {1: 2}}\nexp_name: toy-{game}-dqn\n"
    )
    with pytest.raises(ConfigError, match=r"^preset family toy-\{game\}-dqn.yaml: 'game_overrides' must map a game"):
        preset_names()


def test_overrides_are_parsed_as_yaml_values():
    cfg = load_config("cartpole-dqn", ["seed=3", "policy.learn.learning_rate=1e-4",
                                       "policy.model.encoder_hidden_size_list=[32, 16]", "run.progress=false"])
    assert cfg.seed == 3
    assert cfg.policy.learn.learning_rate == pytest.approx(1e-4)
    assert cfg.policy.model.encoder_hidden_size_list == [32, 16]
    assert cfg.run.progress is False


def test_dict_and_yaml_round_trip(tmp_path):
    cfg = load_config({"seed": 5, "policy": {"learn": {"batch_size": 32}}})
    path = tmp_path / "c.yaml"
    dump_config(cfg, path)
    assert load_config(path) == cfg


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["policy.learn.batchsize=3"],
         "unknown config key 'policy.learn.batchsize' (did you mean 'policy.learn.batch_size'?)"),
        (["policy.learn.batch_size=0"], "config key 'policy.learn.batch_size': Input should be greater than 0"),
        (["run.keep_checkpoints=0"], "config key 'run.keep_checkpoints': Input should be greater than 0"),
        (["policy.learn.learning_rate=fast"], "config key 'policy.learn.learning_rate'"),
        (["polcy.nstep=3"], "unknown config key 'polcy' (did you mean 'policy'?)"),
        (["seed"], "override 'seed' is not of the form key.path=value"),
    ],
)
def test_bad_values_fail_with_one_line_naming_the_key(overrides, message):
    with pytest.raises(ConfigError) as info:
        load_config("cartpole-dqn", overrides)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_preset_suggests_closest():
    with pytest.raises(ConfigError, match="unknown preset 'cartpol-dqn' \\(did you mean 'cartpole-dqn'\\?\\)"):
        load_config("cartpol-dqn")


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("policy: [1, 2")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(listy)


def test_hard_and_soft_target_update_are_exclusive():
    soft = load_config({"policy": {"learn": {"target_theta": 0.01}}})
    assert soft.policy.learn.target_theta == 0.01 and soft.policy.learn.target_update_freq is None
    with pytest.raises(ConfigError, match="use exactly one target update"):
        load_config({"policy": {"learn": {"target_theta": 0.01, "target_update_freq": 5}}})
    with pytest.raises(ConfigError, match="use exactly one target update"):
        load_config({"policy": {"learn": {"target_update_freq": None}}})
    from_preset = load_config("cartpole-dqn",
                              ["policy.learn.target_theta=0.01", "policy.learn.target_update_freq=null"])
    assert from_preset.policy.learn.target_update_freq is None


def test_resolved_non_default_config_round_trips(tmp_path):
    cfg = load_config("bitflip-her-dqn", ["policy.learn.target_theta=0.05", "policy.learn.target_update_freq=null",
                                          "env.env_kwargs.n_bits=9"])
    dump_config(cfg, tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.yaml") == cfg


def test_parse_override_keeps_strings():
    assert parse_override("env.env_id=CartPole-v1") == ("env.env_id", "CartPole-v1")


def test_easydict_like_source_is_accepted():
    class AttrDict(dict):
        __getattr__ = dict.__getitem__

    cfg = load_config(AttrDict(seed=2, env=AttrDict(env_id="CartPole-v1")))
    assert cfg.seed == 2


def test_replay_ratio_sets_update_per_collect_from_the_env_steps_really_collected():
    cfg = load_config("pendulum-sac", ["env.collector_env_num=3", "policy.learn.replay_ratio=2"])
    assert cfg.env_steps_per_collect == 9  # n_sample 8 in whole vector steps of 3
    assert cfg.policy.learn.update_per_collect == 18 and cfg.updates_per_env_step == 2.0
    assert load_config("cartpole-dqn").updates_per_env_step == 0.5  # 48 updates per 96 steps


def test_a_continuous_policy_without_soft_target_updates_is_refused():
    with pytest.raises(ConfigError, match=r"'policy\.learn\.target_theta' must be set: policy\.type 'sac' uses soft"):
        load_config({"policy": {"type": "sac"}})


def test_crossq_refuses_target_settings_and_checks_adam_betas():
    cfg = load_config("hopper-crossq")
    assert cfg.policy.learn.target_theta is None and cfg.policy.learn.adam_betas == (0.5, 0.999)
    with pytest.raises(ConfigError, match=r"'policy\.learn\.target_theta' is not read by policy\.type 'crossq'"):
        load_config("hopper-crossq", ["policy.learn.target_theta=0.005"])
    with pytest.raises(ConfigError, match=r"'policy\.learn\.adam_betas\.1': Input should be less than 1"):
        load_config("hopper-crossq", ["policy.learn.adam_betas=[0.5,1.0]"])


def test_obs_norm_on_dqn_is_refused_by_name():
    refused = r"'policy\.model\.obs_norm' is not read by policy\.type 'dqn': remove it \(it is read by sac, td3, ddpg"
    with pytest.raises(ConfigError, match=refused):
        load_config("cartpole-dqn", ["policy.model.obs_norm=true"])


def test_precision_is_checked_by_name():
    assert load_config("pendulum-sac", ["policy.learn.precision=bf16-mixed"]).policy.learn.precision == "bf16-mixed"
    with pytest.raises(ConfigError, match=r"'policy\.learn\.precision': Input should be 'fp32' or 'bf16-mixed'"):
        load_config("pendulum-sac", ["policy.learn.precision=fp16"])
    assert load_config("cartpole-dqn", ["policy.learn.precision=bf16-mixed"]).policy.learn.precision == "bf16-mixed"
