"""Walking the scenario models alongside a scenario document.

Overrides (``--set``) and error messages need to know, at any point of a document, which keys
are allowed there and what lies below them. The pydantic models are the single source of that
knowledge; this module reads it from their annotations.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = ["Node", "classify", "default_item_name", "keys_of", "node_at", "wants_str"]


@dataclass(frozen=True)
class Node:
    """What a place in the document holds, by the models."""

    kind: Literal["model", "union", "list", "dict", "leaf"]
    cls: type[BaseModel] | None = None  # model
    members: dict[str, type[BaseModel]] = field(default_factory=dict)  # union: tag value -> model
    tag: str = "kind"  # union discriminator
    item: Any = None  # list item / dict value annotation

    @property
    def scalar_key(self) -> str | None:
        """A model or union that accepts a scalar shortcut stores it under this key."""
        if self.kind == "union":
            return self.tag
        if self.kind == "model" and self.cls is not None:
            return typing.cast("str | None", getattr(self.cls, "scalar_shortcut", None))
        return None

    def member(self, node: Any) -> type[BaseModel] | None:
        """The union member a document table selects with its tag, if any."""
        if self.kind == "model":
            return self.cls
        if self.kind == "union" and isinstance(node, dict):
            tag = node.get(self.tag)
            if isinstance(tag, str):
                return self.members.get(tag)
        return None


def _strip(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _tag_of(cls: type[BaseModel], tag: str) -> str | None:
    f = cls.model_fields.get(tag)
    if f is None:
        return None
    ann = _strip(f.annotation)
    if get_origin(ann) is Literal:
        (value,) = get_args(ann)
        return str(value)
    return None


def classify(annotation: Any) -> Node:
    annotation = _strip(annotation)
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [_strip(a) for a in get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return classify(members[0])
        if all(isinstance(m, type) and issubclass(m, BaseModel) for m in members):
            tags = {_tag_of(m, "kind"): m for m in members}
            if None not in tags:
                return Node("union", members=typing.cast("dict[str, type[BaseModel]]", tags))
        return Node("leaf", item=annotation)
    if origin is list:
        return Node("list", item=get_args(annotation)[0])
    if origin is dict:
        return Node("dict", item=get_args(annotation)[1])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return Node("model", cls=annotation)
    return Node("leaf", item=annotation)


def wants_str(node: Node) -> bool:
    """A leaf whose only scalar type is str (``kernel.version``, names)."""
    return node.kind == "leaf" and node.item is str


def fields_of(cls: type[BaseModel]) -> dict[str, Any]:
    """Document key (alias or name) -> annotation."""
    return {(f.alias or name): f.annotation for name, f in cls.model_fields.items()}


def keys_of(node: Node, doc: Any) -> dict[str, Any] | None:
    """The keys a table at ``node`` may have (-> annotation), or None for free-form tables."""
    if node.kind == "model":
        assert node.cls is not None
        return fields_of(node.cls)
    if node.kind == "union":
        member = node.member(doc)
        if member is not None:
            return fields_of(member)
        merged: dict[str, Any] = {}
        for m in node.members.values():
            merged.update(fields_of(m))
        return merged
    return None


def child(node: Node, doc: Any, key: str | int) -> Node:
    if node.kind in ("list", "dict"):
        return classify(node.item)
    keys = keys_of(node, doc) or {}
    if isinstance(key, str) and key in keys:
        return classify(keys[key])
    return Node("leaf")


def node_at(root: type[BaseModel], doc: Any, path: Sequence[str | int]) -> tuple[Node, Any]:
    """The schema node and document value at ``path`` (value None when absent)."""
    node = classify(root)
    value = doc
    for key in path:
        node = child(node, value, key)
        if isinstance(value, dict) and isinstance(key, str):
            value = value.get(key)
        elif isinstance(value, list) and isinstance(key, int) and 0 <= key < len(value):
            value = value[key]
        else:
            value = None
    return node, value


def default_item_name(node: Node, item: Any, index: int) -> str | None:
    """The name of an array element as the loader defaults it (``swap0``, ``random2``)."""
    if isinstance(item, dict) and isinstance(item.get("name"), str):
        return typing.cast(str, item["name"])
    if node.kind == "union" and isinstance(item, dict) and isinstance(item.get(node.tag), str):
        return f"{item[node.tag]}{index}"
    if node.kind == "model" and node.cls is not None:
        prefix = getattr(node.cls, "default_name_prefix", None)
        if isinstance(prefix, str):
            return f"{prefix}{index}"
    return None
