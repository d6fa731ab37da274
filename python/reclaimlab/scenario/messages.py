"""pydantic's validation errors as the scenario's own messages: the key path as the user
wrote it (union tags and validator names dropped), what was expected, and hints for keys that
are close to a known one."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from pydantic_core import ErrorDetails

from reclaimlab import native
from reclaimlab._schema import keys_of, node_at
from reclaimlab.errors import Problem
from reclaimlab.scenario.models import Scenario
from reclaimlab.units import describe

__all__ = ["translate"]


def _doc_path(loc: Sequence[str | int], doc: Any) -> tuple[list[str | int], bool]:
    """Map a pydantic loc onto the document: drop union tags and validator names.

    Returns the path and whether it reached the end of ``loc`` (the last element may be a key
    that is absent from the document: a missing key).
    """
    out: list[str | int] = []
    node = doc
    loc = [x for x in loc if x != "[key]"]
    for i, el in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, dict) and isinstance(el, str) and el in node:
            out.append(el)
            node = node[el]
        elif isinstance(node, list) and isinstance(el, int) and 0 <= el < len(node):
            out.append(el)
            node = node[el]
        elif isinstance(node, (dict, list)):
            if last:
                out.append(el)
                return out, True
        else:
            return out, False
    return out, True


def _or_list(expected: str) -> str:
    """pydantic's "'a', 'b' or 'c'" -> "'a', 'b', 'c'"."""
    head, sep, tail = expected.rpartition(" or ")
    return f"{head}, {tail}" if sep else expected


_TYPE_NAMES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "float_type": "a number",
    "float_parsing": "a number",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}

_HINTS: dict[tuple[str, ...], str] = {
    ("compare", "max_time"): "max_time is a top-level key: put it before the first [table]",
    # A knob whose file name is not an identifier, written as its lowered field name.
    **{
        ("kernel", k.section, k.field): f"the {'sysctl' if k.kernel_file.startswith('/proc/sys/') else 'file'} is spelled {k.name}"
        for k in native.knobs()
        if k.name != k.field
    },
}


def translate(err: ErrorDetails, doc: dict[str, Any]) -> Problem:
    loc = err["loc"]
    typ = err["type"]
    ctx: dict[str, Any] = dict(err.get("ctx") or {})
    got = describe(err.get("input"))
    path, complete = _doc_path(loc, doc)

    if typ == "missing":
        if not complete:  # below a scalar written for a table (dist = "zipf"): name the key
            return Problem(tuple(path), f"missing required key {loc[-1]!r}")
        return Problem(tuple(path), "required key is missing")
    if typ == "extra_forbidden":
        key = str(path[-1])
        node, value = node_at(Scenario, doc, path[:-1])
        allowed = list(keys_of(node, value) or {})
        hint = _HINTS.get(tuple(x for x in path if isinstance(x, str)))
        close = difflib.get_close_matches(key, allowed, n=1)
        msg = "unknown key"
        if hint:
            msg += f" ({hint})"
        elif close:
            msg += f" (did you mean {close[0]!r}?)"
        if allowed:
            msg += "; expected one of: " + ", ".join(allowed)
        return Problem(tuple(path), msg)
    if typ == "union_tag_invalid":
        node, value = node_at(Scenario, doc, path)
        disc = str(ctx.get("discriminator", "'kind'")).strip("'")
        tag = repr(ctx.get("tag"))
        if isinstance(value, dict):
            path = [*path, disc]
            tag = describe(value.get(disc))
        elif value is not None:
            tag = describe(value)
        return Problem(tuple(path), f"expected one of {ctx.get('expected_tags')}; got {tag}")
    if typ == "union_tag_not_found":
        node, value = node_at(Scenario, doc, path)
        tags = ", ".join(repr(t) for t in node.members) if node.kind == "union" else ""
        disc = str(ctx.get("discriminator", "'kind'")).strip("'")
        if isinstance(value, dict):
            return Problem((*path, disc), "required key is missing" + (f"; expected one of {tags}" if tags else ""))
        return Problem(tuple(path), f"expected a table with a key {disc!r}" + (f" (one of {tags})" if tags else "") + f"; got {got}")
    if typ == "literal_error":
        return Problem(tuple(path), f"expected one of {_or_list(str(ctx.get('expected')))}; got {got}")
    if typ == "value_error":
        return Problem(tuple(path), str(ctx.get("error")))
    if typ in _TYPE_NAMES:
        return Problem(tuple(path), f"expected {_TYPE_NAMES[typ]}; got {got}")
    if typ == "too_short":
        return Problem(tuple(path), f"expected at least {ctx.get('min_length')} element(s)")
    msg = err["msg"]
    if "got" not in msg:
        msg = f"{msg}; got {got}"
    return Problem(tuple(path), msg)
