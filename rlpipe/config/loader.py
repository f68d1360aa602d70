"""Load a :class:`Config` from a dict, a YAML file or a built-in preset, with overrides."""
from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from rlpipe.config.algorithms import learning_rate_keys
from rlpipe.config.schema import ONE_LINE_ERROR, Config, PolicyConfig
from rlpipe.errors import RlpipeError, first_line


class ConfigError(RlpipeError, ValueError):
    """A configuration problem, described in one line that names the key path."""


MAX_CONFIG_BYTES = 1 << 20
"""A config file larger than this (1 MiB) is refused: real configs are a few KiB."""
MAX_CONFIG_VALUES = 100_000
"""Values a config may hold once YAML aliases (``*name``) are expanded: a few aliases share a
value, nested ones build a "billion laughs" bomb that hangs whoever walks it."""


class _YamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader, reading ``1e5`` as a number as YAML 1.2 does (YAML 1.1 wants ``1.0e5``).

    So ``run.max_env_step=1e5`` gives 100000 (pydantic takes an integral float for an int key).
    """


def _expanded_size(data: Any, limit: int) -> int:
    """Values in ``data`` counting every alias as a copy, without expanding anything (each
    shared object is counted once and reused); stops counting past ``limit``."""
    sizes: dict[int, int] = {}

    def size(node: Any) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        total = 1
        for child in children:
            total += size(child)
            if total > limit:
                break
        sizes[id(node)] = total
        return total

    return size(data)


def _load_yaml(text: str) -> Any:
    """Safe-load one YAML document; ``yaml.YAMLError`` when it expands past :data:`MAX_CONFIG_VALUES`."""
    data = yaml.load(text, Loader=_YamlLoader)  # safe: _YamlLoader is a SafeLoader
    if _expanded_size(data, MAX_CONFIG_VALUES) > MAX_CONFIG_VALUES:
        raise yaml.YAMLError(f"its aliases expand to more than {MAX_CONFIG_VALUES} values (an alias bomb?)")
    return data


_YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)

LEARNING_RATE = "the learning rate"
"""Placeholder in :data:`SB3_NAMES` for the learning-rate keys of the config's algorithm."""
SB3_NAMES = {
    "lr": LEARNING_RATE,
    "learning_rate": LEARNING_RATE,
    "buffer_size": "'policy.other.replay_buffer.replay_buffer_size'",
    "gradient_steps": "'policy.learn.update_per_collect' (or 'policy.learn.replay_ratio')",
    "train_freq": "'policy.collect.n_sample'",
    "learning_starts": "'policy.random_collect_size'",
    "exploration_fraction": "'policy.other.eps.decay' (env steps)",
    "exploration_final_eps": "'policy.other.eps.end'",
    "exploration_initial_eps": "'policy.other.eps.start'",
    "target_update_interval": "'policy.learn.target_update_freq'",
    "tau": "'policy.learn.target_theta'",
    "gamma": "'policy.discount_factor'",
    "batch_size": "'policy.learn.batch_size'",
    "n_steps": "'policy.nstep'",
    "ent_coef": "'policy.learn.alpha' (with 'policy.learn.auto_alpha')",
    "policy_delay": "'policy.learn.actor_update_freq'",
    "target_policy_noise": "'policy.learn.noise_sigma'",
    "target_noise_clip": "'policy.learn.noise_clip'",
    "total_timesteps": "'run.max_env_step'",
    "net_arch": "'policy.model.encoder_hidden_size_list'",
    "policy_kwargs": "'policy.model' (set its keys one by one, e.g. policy.model.encoder_hidden_size_list=[64,64])",
    "device": "'policy.cuda' (true: train on the GPU)",
    "n_envs": "'env.collector_env_num'",
}
"""Stable-Baselines3 argument names and the rlpipe key that does the same job (for hints); the
learning rate's keys depend on ``policy.type`` (:func:`sb3_name_hint`)."""


def sb3_name_hint(name: str, data: Mapping[str, Any]) -> str:
    """The rlpipe key(s) doing the job of Stable-Baselines3's argument ``name`` in the config ``data``."""
    hint = SB3_NAMES[name]
    if hint != LEARNING_RATE:
        return hint
    policy = data.get("policy")
    policy_type = policy.get("type") if isinstance(policy, Mapping) else PolicyConfig.model_fields["type"].default
    return " / ".join(f"'{key}'" for key in learning_rate_keys(policy_type))


FAMILY_KEY = "games"
"""A preset file named with ``{game}`` (``minatar-{game}-dqn.yaml``) is a family: one preset per
entry ``game: Game`` of its top-level ``games`` mapping, with ``{game}`` and ``{Game}`` in its
text replaced by the entry's key and value. Presets that differ only in the game share one file."""

GAME_OVERRIDES_KEY = "game_overrides"
"""Optional in a family file: ``game: {dotted.key: value}``, applied to that game's preset only (the
form of command-line overrides), for the few settings that must differ by game."""


def _presets_folder() -> Any:
    """The folder of the built-in preset files, inside the installed package."""
    return resources.files("rlpipe.config") / "presets"


@functools.cache
def _preset_sources() -> dict[str, tuple[str, tuple[str, str] | None]]:
    """Each built-in preset's name -> its file's name and, for a family member, its ``(game, Game)``."""
    sources: dict[str, tuple[str, tuple[str, str] | None]] = {}

    def add(name: str, file_name: str, game: tuple[str, str] | None) -> None:
        if name in sources:
            raise ConfigError(f"preset '{name}' is defined twice: by {sources[name][0]} and by {file_name}")
        sources[name] = (file_name, game)

    for file in sorted(_presets_folder().iterdir(), key=lambda entry: entry.name):
        if not file.name.endswith(".yaml"):
            continue
        stem = file.name[: -len(".yaml")]
        if "{game}" not in stem:
            add(stem, file.name, None)
            continue
        family = _read_yaml(file.read_text(), f"preset family {file.name}")
        games = family.get(FAMILY_KEY)
        if not isinstance(games, dict) or not games:
            raise ConfigError(f"preset family {file.name}: needs a '{FAMILY_KEY}' mapping of game: Game")
        _check_game_overrides(family.get(GAME_OVERRIDES_KEY, {}), games, file.name)
        for game, title in games.items():
            add(stem.replace("{game}", str(game)), file.name, (str(game), str(title)))
    return sources


def _check_game_overrides(overrides: Any, games: dict[Any, Any], file_name: str) -> None:
    """ConfigError unless ``overrides`` maps games of the family to mappings of dotted keys."""
    if not isinstance(overrides, dict) or not all(
        isinstance(keys, dict) and all(isinstance(key, str) for key in keys) for keys in overrides.values()
    ):
        raise ConfigError(f"preset family {file_name}: '{GAME_OVERRIDES_KEY}' must map a game to "
                          "{dotted.key: value}")
    unknown = sorted(str(game) for game in overrides if game not in games)
    if unknown:
        raise ConfigError(f"preset family {file_name}: '{GAME_OVERRIDES_KEY}' names {', '.join(unknown)}, "
                          f"not in '{FAMILY_KEY}'")


def preset_names() -> list[str]:
    """Names of the built-in presets (a family's members each by name)."""
    return sorted(_preset_sources())


def _read_preset(name: str) -> dict[str, Any]:
    file_name, game = _preset_sources()[name]
    text = (_presets_folder() / file_name).read_text()
    if game is None:
        return _read_yaml(text, f"preset {name}")
    data = _read_yaml(text.replace("{game}", game[0]).replace("{Game}", game[1]), f"preset {name}")
    del data[FAMILY_KEY]
    for key, value in data.pop(GAME_OVERRIDES_KEY, {}).get(game[0], {}).items():
        _set_dotted(data, key, value)
    return data


def _read_yaml(text: str, origin: str, allow_empty: bool = False) -> dict[str, Any]:
    try:
        data = _load_yaml(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{origin}: not valid YAML ({first_line(err)})") from None
    if data is None:
        if allow_empty:
            return {}
        raise ConfigError(f"{origin}: the config is empty (name a preset, or give at least one key)")
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def _load_source(source: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(source, Mapping):
        return _to_plain(source)
    text = str(source)
    if text in _preset_sources():
        return _read_preset(text)
    path = Path(text)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {path.stat().st_size} bytes is too large for a config "
                              f"(limit {MAX_CONFIG_BYTES})")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ConfigError(f"{path}: not a UTF-8 text file (byte {err.start} cannot be decoded)") from None
        return _read_yaml(text, str(path))
    hint = difflib.get_close_matches(text, preset_names(), n=1)
    suffix = f" (did you mean '{hint[0]}'?)" if hint else f" (presets: {', '.join(preset_names())})"
    raise ConfigError(f"unknown preset '{text}'{suffix}")


def _to_plain(data: Mapping[str, Any]) -> dict[str, Any]:
    """Copy nested mappings (EasyDicts, dicts) into plain dicts."""
    return {k: _to_plain(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[leaf] = value


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``key.path=value``; the value is parsed as YAML (``1e-3``, ``true``, ``[64, 64]``)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override '{text}' is not of the form key.path=value")
    try:
        value = _load_yaml(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def _model_at(path: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class that holds the field at ``path`` (for typo hints)."""
    model: type[BaseModel] = Config
    for part in path[:-1]:
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        candidates = [a for a in getattr(field.annotation, "__args__", ()) or (field.annotation,)]
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def _describe(err: ValidationError, data: Mapping[str, Any]) -> str:
    """One line for the first error of validating ``data``."""
    first = err.errors()[0]
    loc = tuple(first["loc"])
    key = ".".join(str(p) for p in loc)
    if first["type"] == "extra_forbidden":
        model = _model_at(loc)
        leaf = str(loc[-1])
        if leaf in SB3_NAMES:  # before close matches: 'n_envs' is SB3's, not a typo of 'env'
            return f"unknown config key '{key}': Stable-Baselines3's '{leaf}' is {sb3_name_hint(leaf, data)} here"
        hint = difflib.get_close_matches(leaf, list(model.model_fields), n=1) if model else []
        if hint:
            return f"unknown config key '{key}' (did you mean '{'.'.join([*map(str, loc[:-1]), hint[0]])}'?)"
        return f"unknown config key '{key}'"
    if first["type"] == ONE_LINE_ERROR:
        return first["msg"]
    where = f"config key '{key}'" if key else "config"
    if first["type"] == "value_error":  # our own validators: the message names the keys
        return f"{where}: {first['msg'].removeprefix('Value error, ')}"
    return f"{where}: {first['msg']} (got {first.get('input')!r})"


def load_config(
    source: str | Path | Mapping[str, Any] | Config | None = None, overrides: Iterable[str] = ()
) -> Config:
    """Build a validated :class:`Config`.

    ``source`` is a preset name, a YAML path, a (nested) dict or a ``Config``; ``overrides``
    are ``key.path=value`` strings applied on top. Raises :class:`ConfigError` in one line.
    """
    if isinstance(source, Config):
        data = source.model_dump()
    elif source is None:
        data = {}
    else:
        data = _load_source(source)
    for text in overrides:
        key, value = parse_override(text)
        _set_dotted(data, key, value)
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_describe(err, data)) from None


def dump_config(cfg: Config, path: Path) -> None:
    """Write the resolved config as YAML (it loads back to the same Config)."""
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
