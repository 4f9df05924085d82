"""Markdown tables from eval items: the paper's main table and a cost table.

    metaagentx eval --table runs/a/eval/sa runs/a/eval/metaagentx-rl

Main table: one row per label (method), one column per benchmark, ``Avg`` last; each cell is
pass@1 averaged over samples, in percent. ``Avg`` is the mean over the row's benchmarks.
Cost table: per label and structure, tasks run, tokens in/out and LLM calls per task.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from metaagentx.analysis import PAPER_BENCHMARKS, PAPER_COLUMNS


def display_name(benchmark: str) -> str:
    return PAPER_COLUMNS.get(benchmark, benchmark)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def scores(rows: list[dict[str, Any]]) -> dict[str, float]:
    """{benchmark: pass@1 in %} — the mean reward over all (task, sample) items."""
    by: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by[r["benchmark"]].append(float(r["reward"]))
    return {b: 100.0 * _mean(v) for b, v in by.items()}


def main_table(results: dict[str, list[dict[str, Any]]]) -> str:
    """``{label: rows}`` -> Markdown table with one column per benchmark and Avg last."""
    per_label = {label: scores(rows) for label, rows in results.items()}
    benches: list[str] = []
    for rows in results.values():
        for r in rows:
            if r["benchmark"] not in benches:
                benches.append(r["benchmark"])
    # the paper's column order first (AIME24 ... CodeContests), then any other benchmark
    benches.sort(key=lambda b: PAPER_BENCHMARKS.index(b) if b in PAPER_BENCHMARKS else 99)
    head = ["Method"] + [display_name(b) for b in benches] + ["Avg"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, sc in per_label.items():
        cells = [f"{sc[b]:.1f}" if b in sc else "–" for b in benches]
        cells.append(f"{_mean(list(sc.values())):.1f}")
        lines.append("| " + " | ".join([label] + cells) + " |")
    return "\n".join(lines) + "\n"


def cost_table(results: dict[str, list[dict[str, Any]]]) -> str:
    """Per label and structure: tasks, accuracy, valid (submitted) %, tokens and calls per task."""
    head = [
        "Method",
        "Structure",
        "Tasks",
        "Acc %",
        "Submitted %",
        "Tokens in/task",
        "Tokens out/task",
        "Calls/task",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, rows in results.items():
        by: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            by[r["structure"] or "none"].append(r)
        for structure in sorted(by):
            g = by[structure]
            cells = [
                label,
                structure,
                str(len(g)),
                f"{100 * _mean([float(r['reward']) for r in g]):.1f}",
                f"{100 * _mean([float(r['outcome'] == 'submitted') for r in g]):.1f}",
                f"{_mean([r['tokens_in'] for r in g]):.0f}",
                f"{_mean([r['tokens_out'] for r in g]):.0f}",
                f"{_mean([r['calls'] for r in g]):.2f}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_report(results: dict[str, list[dict[str, Any]]]) -> str:
    """Both tables under headings, as written to ``table.md``."""
    return (
        "## Accuracy (pass@1, %)\n\n"
        + main_table(results)
        + "\n## Cost per task\n\n"
        + cost_table(results)
    )


def load_results(paths: list[str | Path]) -> dict[str, list[dict[str, Any]]]:
    """Eval folders (``<out>/eval/<label>``, a run folder holding ``eval/``, or an
    ``items.jsonl`` file) -> ``{label: rows}`` in the order given."""
    from metaagentx.eval import EvalError, read_items

    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            files.append(p)
        elif (p / "items.jsonl").is_file():
            files.append(p / "items.jsonl")
        elif (p / "eval").is_dir():
            files += sorted((p / "eval").glob("*/items.jsonl"))
        else:
            raise EvalError(f"{p}: no items.jsonl there (nor under {p}/eval/*/)")
    results: dict[str, list[dict[str, Any]]] = {}
    for f in files:
        rows = read_items(f)
        label = rows[0]["label"] if rows and rows[0].get("label") else f.parent.name
        while label in results:
            label += "'"
        results[label] = rows
    return results
