"""Typed, validated configuration: schema, presets and loading."""
from rlpipe.config.loader import ConfigError, dump_config, load_config, parse_override, preset_names
from rlpipe.config.schema import Config

__all__ = ["Config", "ConfigError", "dump_config", "load_config", "parse_override", "preset_names"]
