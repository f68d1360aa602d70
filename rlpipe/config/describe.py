"""The config keys with their type, value and description (``rlpipe config show``)."""
from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Iterator
from typing import Annotated, Any, Literal, NamedTuple, Union, get_args, get_origin

from pydantic import BaseModel

from rlpipe.config.algorithms import ALGORITHMS
from rlpipe.config.schedule import Schedule
from rlpipe.config.schema import Config


class KeyInfo(NamedTuple):
    """One leaf key of a config."""

    key: str  # dotted path, e.g. policy.learn.batch_size
    type: str  # the annotation, e.g. "int | None"
    value: Any  # the value in the config shown (the default when its section is unset; a schedule as its string)
    default: Any  # the schema's default ("(required)" when there is none)
    description: str


def _section(annotation: Any) -> type[BaseModel] | None:
    """The config model a field holds (``X`` for ``X`` and ``X | None``), or None for a leaf."""
    candidates = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    models = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
    return models[0] if models else None


REQUIRED = "(required)"
_BOUNDS = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))


def _bounds(metadata: Iterable[Any]) -> str:
    """`` > 0``-style text for annotated_types constraints (``Gt(0)``, ``Field(ge=0)``)."""
    parts = [f"{sign} {getattr(m, attr)}" for m in metadata for attr, sign in _BOUNDS if hasattr(m, attr)]
    return f" ({', '.join(parts)})" if parts else ""


def _type_name(annotation: Any) -> str:
    """A short, readable form: ``int (> 0) | None``, ``'exp' | 'linear'``, ``list[int (> 0)]``."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0]) + _bounds(args[1:])
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in args)
    if origin is Literal:
        return " | ".join(repr(arg) for arg in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(arg) for arg in args)}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def describe_config(cfg: Config | None = None) -> Iterator[KeyInfo]:
    """The keys of a config depth first, with values from ``cfg`` (with None: every key, with its default).

    Only the keys ``cfg``'s algorithm reads (``cfg.policy.type``'s row of the algorithm table),
    exploring as ``cfg`` makes it (noisy networks read no epsilon keys), appear. A section that
    is off (``policy.other.her: None``) is listed with its keys' defaults, so every key a user
    can set appears.
    """
    if cfg is None:
        return _walk(None, Config, "", None)
    row = ALGORITHMS[cfg.policy.type]
    exploration = row.exploration_of(cfg.policy)
    return _walk(cfg, Config, "", lambda key: row.reads(key, exploration))


def _walk(cfg: BaseModel | None, model: type[BaseModel], prefix: str,
          read: Callable[[str], bool] | None) -> Iterator[KeyInfo]:
    """Walk ``model``'s keys (those ``read`` accepts; None: all) depth first, with values from
    ``cfg`` (defaults where it is None)."""
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        if read is not None and not read(key):
            continue
        value = getattr(cfg, name) if cfg is not None else None
        section = _section(field.annotation)
        default = REQUIRED if field.is_required() else field.get_default(call_default_factory=True)
        if section is None:
            shown = default if cfg is None else str(value) if isinstance(value, Schedule) else value
            yield KeyInfo(key, _type_name(field.annotation) + _bounds(field.metadata), shown, default,
                          field.description or "")
            continue
        if value is None:
            yield KeyInfo(key, f"{section.__name__} | None", None, None, field.description or "")
        yield from _walk(value if isinstance(value, BaseModel) else None, section, f"{key}.", read)
