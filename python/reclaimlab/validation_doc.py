"""docs/validation.md from validate results: each scenario's table (``validate --compare``
results: their ranking tables) and the summary, as Markdown or written into a document's
generated blocks (``reclaimlab validation-report``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reclaimlab.ranking import RankingResult, is_ranking_json, ranking_markdown
from reclaimlab.report import BEGIN, DocError, replace_block
from reclaimlab.validate import KERNELS_BLOCK, SUMMARY_BLOCK, ValidateResult, kernels_markdown, scenario_markdown, summary_markdown

__all__ = ["SUMMARY_BLOCK", "is_validate_json", "load_results", "markdown", "update_doc"]


def _summary_order(text: str, plain: Sequence[ValidateResult], ranked: Sequence[Any]) -> list[ValidateResult]:
    """The summary's scenarios in the order of their blocks in the document: each validate
    result at its own block, each compared configuration (``RankingResult.config_results``)
    at its scenario's block; results without a block last."""

    def pos(name: str) -> int:
        i = text.find(BEGIN.format(name=name))
        return i if i >= 0 else len(text)

    entries = [(pos(r.scenario), r) for r in plain] + [(pos(k.scenario), c) for k in ranked for c in k.config_results()]
    return [r for _, r in sorted(entries, key=lambda e: e[0])]


def is_validate_json(path: str | os.PathLike[str]) -> bool:
    """False for the codec check's files (``codec-check*.json``), which are not validate results."""
    return not Path(path).name.startswith("codec-check")


def load_results(result_paths: Sequence[str | os.PathLike[str]]) -> tuple[list[ValidateResult], list[Any]]:
    """The validate results among ``result_paths`` and the ``validate --compare`` results
    (``RankingResult``), ``codec-check*.json`` skipped."""
    plain: list[ValidateResult] = []
    ranked: list[RankingResult] = []
    for p in result_paths:
        if is_ranking_json(p):
            ranked.append(RankingResult.load(p))
        elif is_validate_json(p):
            plain.append(ValidateResult.load(p))
    return plain, ranked


def update_doc(
    doc_path: str | os.PathLike[str],
    result_paths: Sequence[str | os.PathLike[str]],
    other_kernels: Sequence[str | os.PathLike[str]] = (),
) -> list[str]:
    """Rewrite ``doc_path``'s generated blocks: each scenario's table (block named after the
    scenario; for a ``validate --compare`` result, its ranking tables), and the summary (block
    ``validation-summary``, scenarios in the order of their blocks in the document; compared
    configurations count as scenarios). With ``other_kernels`` (results of other kernels, e.g.
    the VM lab's, which have no block of their own), also the per-kernel table (block
    ``validation-kernels``) over all of them. ``codec-check*.json`` are skipped. Other text is kept
    byte for byte; the file is written only once every block was found. Returns the scenarios
    updated."""
    path = Path(doc_path)
    text = path.read_text(encoding="utf-8")
    plain, ranked = load_results(result_paths)
    try:
        for result in plain:
            text = replace_block(text, result.scenario, scenario_markdown(result))
        for r in ranked:
            text = replace_block(text, r.scenario, ranking_markdown(r))
        text = replace_block(text, SUMMARY_BLOCK, summary_markdown(_summary_order(text, plain, ranked)))
        if other_kernels:
            more, more_ranked = load_results(other_kernels)
            everything = _summary_order(text, plain, ranked) + more + [c for r in more_ranked for c in r.config_results()]
            text = replace_block(text, KERNELS_BLOCK, kernels_markdown(everything))
    except DocError as e:
        raise DocError(f"{path}: {e}") from None
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return [r.scenario for r in _summary_order(text, plain, [])] + [r.scenario for r in ranked]


def markdown(result_paths: Sequence[str | os.PathLike[str]]) -> str:
    """The summary and every scenario's table, as one Markdown text."""
    plain, ranked = load_results(result_paths)
    results = plain + [c for r in ranked for c in r.config_results()]
    parts = ["## Summary\n\n" + summary_markdown(results)]
    parts += [f"## {r.scenario}\n\n" + scenario_markdown(r) for r in results]
    return "\n".join(parts)
