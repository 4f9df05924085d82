"""Write a run report: HTML page, PNG figures and Markdown summary of a training/eval run.

    metaagentx report RUN_DIR [--compare OTHER] [--out DIR] [--max-systems 12]

RUN_DIR holds metrics.jsonl, eval/<label>/items.jsonl and samples/ (any may be missing).
OTHER (a run folder, an eval folder or an items.jsonl) is the baseline for attribution: which
newly solved tasks came from a different structure (design) or the same one (execution).
Output (default RUN_DIR/report): report.html (opens offline), figures/*.png, summary.md,
analysis.json.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="run folder (metrics.jsonl, eval/, samples/)")
    parser.add_argument("--compare", default=None,
                        help="baseline run folder, eval folder or items.jsonl")
    parser.add_argument("--out", default=None, help="output folder (default RUN_DIR/report)")
    parser.add_argument("--max-systems", type=int, default=12,
                        help="designed systems to show in the page (default 12)")


def run(args: argparse.Namespace) -> int:
    """Build the report and print where it went."""
    from metaagentx.report import build_report

    out = build_report(args.run_dir, compare=args.compare, out=args.out,
                       max_systems=args.max_systems)
    print(f"report: {out / 'report.html'}")
    print(f"summary: {out / 'summary.md'}")
    return 0
