"""``--set key=value`` overrides, applied to the scenario document before validation.

A key is a dotted path into the TOML document. Because knob names contain dots themselves
(``memory.high``, ``zswap.incompressible``), the path is resolved greedily against the
document and the models: at each level the longest run of parts that names a known key wins.
Array elements are addressed by index (``processes.0`` or ``processes[0]``) or by name
(``processes.app.regions.a``). Parts in double quotes are taken literally.

The value is parsed as a TOML value (``true``, ``20``, ``"x"``, ``[1, 2]``, ``{ preset = "ssd" }``);
anything that is not valid TOML (``1GiB``, ``max``) is taken as a string. A table value is merged
key by key into the table already there; any other value replaces what is there.
"""

from __future__ import annotations

import copy
import difflib
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from reclaimlab._schema import Node, child, classify, default_item_name, keys_of, wants_str
from reclaimlab.errors import Path, format_key, format_path

__all__ = [
    "Override",
    "OverrideError",
    "apply_overrides",
    "flatten_table",
    "parse_override",
    "parse_value",
    "split_key",
    "toml_value",
]


class OverrideError(ValueError):
    def __init__(self, override: Override, message: str):
        self.override = override
        super().__init__(message)


@dataclass(frozen=True)
class Override:
    key: str
    value: Any
    origin: str = ""  # how the user wrote it, for messages: "--set a=b", "compare config 'x'"
    text: str | None = None  # the value as typed on a command line, if it was

    def value_for(self, target: Node) -> Any:
        """The value to store at ``target``: the typed text where a string is wanted, so that
        ``kernel.version=6.10`` means "6.10", not the float 6.1."""
        if self.text is not None and wants_str(target) and not isinstance(self.value, str):
            return self.text
        return self.value

    def __str__(self) -> str:
        """``key=value`` as typed on the command line, or with the value in TOML syntax."""
        return f"{self.key}={self.text if self.text is not None else toml_value(self.value)}"


@dataclass(frozen=True)
class _Part:
    text: str
    atomic: bool  # quoted or [n]: never joined with neighbours


def parse_value(text: str) -> Any:
    """A TOML value, or the text itself when it is not one (``1GiB`` -> ``'1GiB'``)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_override(spec: str, origin: str | None = None) -> Override:
    """``"kernel.vm.swappiness=100"`` -> Override("kernel.vm.swappiness", 100)."""
    key, sep, value = spec.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"expected key=value (like kernel.zswap.enabled=true); got {spec!r}")
    text = value.strip()
    return Override(key.strip(), parse_value(text), origin if origin is not None else f"--set {spec}", text)


def split_key(key: str) -> list[_Part]:
    """Split a dotted key into parts: ``a."b.c"[0].d`` -> a, b.c (atomic), 0 (atomic), d."""
    parts: list[_Part] = []
    i, n = 0, len(key)
    expect_part = True
    while i < n:
        c = key[i]
        if c == ".":
            if expect_part:
                raise ValueError(f"empty part in key {key!r}")
            expect_part = True
            i += 1
        elif c == "[":
            j = key.find("]", i)
            if j < 0 or not key[i + 1 : j].strip().isdigit():
                raise ValueError(f"expected [index] in key {key!r}")
            parts.append(_Part(key[i + 1 : j].strip(), True))
            expect_part = False
            i = j + 1
        elif c in "\"'":
            j = i + 1
            buf = []
            while j < n and key[j] != c:
                if c == '"' and key[j] == "\\" and j + 1 < n:
                    j += 1
                buf.append(key[j])
                j += 1
            if j >= n:
                raise ValueError(f"unterminated quote in key {key!r}")
            parts.append(_Part("".join(buf), True))
            expect_part = False
            i = j + 1
        else:
            j = i
            while j < n and key[j] not in ".[\"'":
                j += 1
            parts.append(_Part(key[i:j].strip(), False))
            expect_part = False
            i = j
    if expect_part:
        raise ValueError(f"key {key!r} ends in '.'" if key else "empty key")
    return parts


def _joins(parts: Sequence[_Part], i: int) -> list[tuple[str, int]]:
    """Candidate keys starting at part i, longest first: (text, end index)."""
    if parts[i].atomic:
        return [(parts[i].text, i + 1)]
    out: list[tuple[str, int]] = []
    j = i
    while j < len(parts) and not parts[j].atomic:
        j += 1
    for end in range(j, i, -1):
        out.append((".".join(p.text for p in parts[i:end]), end))
    return out


def toml_value(value: Any) -> str:
    """A value in TOML syntax (for provenance and messages)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{format_key(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    return repr(value)


def flatten_table(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables -> dotted keys (keys with dots quoted). Non-table values are leaves."""
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}.{format_key(k)}" if prefix else (k if not isinstance(v, dict) else format_key(k))
        if isinstance(v, dict) and v:
            out.update(flatten_table(v, key))
        else:
            out[key] = v
    return out


def _get(holder: Any, key: str | int) -> Any:
    if isinstance(holder, list):
        assert isinstance(key, int)
        return holder[key]
    return holder.get(key)


class _Resolver:
    def __init__(self, root: type[BaseModel], doc: dict[str, Any], override: Override):
        self.root = root
        self.doc = doc
        self.override = override

    def fail(self, message: str) -> OverrideError:
        return OverrideError(self.override, message)

    def set(self, parts: Sequence[_Part]) -> Path:
        """Set the override's value at ``parts``; return the resolved path."""
        node = classify(self.root)
        holder: Any = self.doc
        path: list[str | int] = []
        i = 0
        while True:
            key, i, node_child = self._step(node, holder, parts, i, path)
            path.append(key)
            last = i == len(parts)
            if last:
                value = copy.deepcopy(self.override.value_for(node_child))
                self._assign(node, holder, key, node_child, value, path)
                return tuple(path)
            nxt = _get(holder, key)
            if nxt is None:
                if node_child.kind in ("model", "union", "dict"):
                    nxt = {}
                    holder[key] = nxt
                else:
                    raise self.fail(f"{format_path(path)} does not exist")
            elif not isinstance(nxt, (dict, list)):
                shortcut = node_child.scalar_key
                if shortcut is None:
                    raise self.fail(f"cannot set a key inside {format_path(path)}: it is a value, not a table")
                nxt = {shortcut: nxt}
                holder[key] = nxt
            holder, node = nxt, node_child

    def _step(self, node: Node, holder: Any, parts: Sequence[_Part], i: int, path: list[str | int]) -> tuple[str | int, int, Node]:
        where = format_path(path) or "the top level"
        if node.kind == "list":
            if not isinstance(holder, list):
                raise self.fail(f"{where} is not an array")
            item_node = classify(node.item)
            part = parts[i]
            if part.text.isdigit():
                index = int(part.text)
                if index >= len(holder):
                    raise self.fail(f"{where} has {len(holder)} element(s); no index {index}")
                return index, i + 1, item_node
            names = {default_item_name(item_node, item, k): k for k, item in enumerate(holder)}
            for text, end in _joins(parts, i):
                if text in names:
                    return names[text], end, item_node
            known = ", ".join(repr(n) for n in names if n is not None)
            raise self.fail(f"{where} has no element named {part.text!r}; expected an index or one of {known}")
        if node.kind == "dict":
            if not isinstance(holder, dict):
                raise self.fail(f"{where} is not a table")
            value_node = classify(node.item)
            if value_node.kind == "leaf":
                # A table of scalars (switches, costs): the rest of the path is one key.
                if all(not p.atomic for p in parts[i:]) or len(parts) - i == 1:
                    return ".".join(p.text for p in parts[i:]), len(parts), value_node
                raise self.fail(f"cannot resolve {self.override.key!r} below {where}")
            joins = _joins(parts, i)
            for text, end in joins:
                if text in holder:
                    return text, end, value_node
            for text, end in joins:  # a new entry: the key whose remainder resolves below it
                if end < len(parts) and self._resolves(value_node, parts, end):
                    return text, end, value_node
            if i + 1 == len(parts):  # the whole entry (a table value)
                return parts[i].text, i + 1, value_node
            raise self.fail(
                f"cannot resolve {self.override.key!r} below {where}: no entry {parts[i].text!r}, and the rest is not a key of one"
            )
        if node.kind in ("model", "union"):
            if not isinstance(holder, dict):
                raise self.fail(f"{where} is not a table")
            keys = keys_of(node, holder) or {}
            for text, end in _joins(parts, i):
                if text in keys:
                    return text, end, child(node, holder, text)
            allowed = ", ".join(keys)
            close = difflib.get_close_matches(parts[i].text, list(keys), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise self.fail(f"unknown key {parts[i].text!r} under {where}{hint}; expected one of: {allowed}")
        raise self.fail(f"cannot set a key inside {format_path(path)}: it is a value, not a table")

    def _resolves(self, node: Node, parts: Sequence[_Part], i: int) -> bool:
        """Whether parts[i:] name a key path in a fresh table of kind ``node``."""
        while i < len(parts):
            if node.kind in ("model", "union"):
                keys = keys_of(node, None) or {}
                for text, end in _joins(parts, i):
                    if text in keys:
                        node, i = classify(keys[text]), end
                        break
                else:
                    return False
            elif node.kind == "dict":
                return True
            else:
                return False
        return True

    def _assign(self, node: Node, holder: Any, key: str | int, target: Node, value: Any, path: list[str | int]) -> None:
        if isinstance(value, dict) and target.kind in ("model", "union", "dict"):
            current = _get(holder, key)
            if not isinstance(current, dict):
                shortcut = target.scalar_key
                current = {shortcut: current} if (shortcut and current is not None and not isinstance(current, list)) else {}
                holder[key] = current
            # The tag first, so that changing it prunes the old kind's keys before the new ones land.
            tag = target.tag if target.kind == "union" else None
            for k in sorted(value, key=lambda k: k != tag):
                self._assign(target, current, k, child(target, current, k), value[k], [*path, k])
            return
        if isinstance(holder, list):
            assert isinstance(key, int)
            holder[key] = value
            return
        assert isinstance(key, str)
        if node.kind in ("model", "union"):
            member = node.member(holder)
            exclusive = getattr(member, "exclusive_keys", ()) if member is not None else ()
            for group in exclusive:
                if key in group:
                    for other in group:
                        if other != key:
                            holder.pop(other, None)
            if node.kind == "union" and key == node.tag and isinstance(value, str) and value in node.members:
                allowed = keys_of(Node("model", cls=node.members[value]), None) or {}
                for k in list(holder):
                    if k not in allowed and k != key:
                        del holder[k]
        holder[key] = value


def apply_overrides(
    root: type[BaseModel], doc: dict[str, Any], overrides: Iterable[Override]
) -> tuple[dict[str, Any], list[tuple[Path, Override]], list[OverrideError]]:
    """A copy of ``doc`` with the overrides applied in order, where each one landed, and the
    overrides whose key could not be resolved (those are skipped)."""
    out = copy.deepcopy(doc)
    landed: list[tuple[Path, Override]] = []
    errors: list[OverrideError] = []
    for ov in overrides:
        work = copy.deepcopy(out)  # commit only overrides that resolve
        try:
            parts = split_key(ov.key)
            path = _Resolver(root, work, ov).set(parts)
        except OverrideError as e:
            errors.append(e)
            continue
        except ValueError as e:
            errors.append(OverrideError(ov, str(e)))
            continue
        out = work
        landed.append((path, ov))
    return out, landed, errors
