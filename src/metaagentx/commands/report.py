"""Write a run report: HTML page, PNG figures and Markdown summary of a training/eval run.

    metaagentx report RUN_DIR [--compare OTHER] [--pair BEFORE,AFTER] [--out DIR]

RUN_DIR holds metrics.jsonl, eval/<label>/items.jsonl and samples/ (any may be missing).
OTHER (a run folder, an eval folder or an items.jsonl) is the baseline for attribution: which
newly solved tasks came from a different structure (design) or the same one (execution).
Without it, the first and last evaluation labels of RUN_DIR are compared, or the two named by
--pair (labels from OTHER are prefixed with its folder name, or "baseline:" for a file).
Output (default RUN_DIR/report): report.html (opens offline), figures/*.png, summary.md,
analysis.json.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="run folder (metrics.jsonl, eval/, samples/)")
    parser.add_argument(
        "--compare", default=None, help="baseline run folder, eval folder or items.jsonl"
    )
    parser.add_argument(
        "--pair",
        default=None,
        metavar="BEFORE,AFTER",
        help="evaluation labels to attribute between",
    )
    parser.add_argument("--out", default=None, help="output folder (default RUN_DIR/report)")
    parser.add_argument(
        "--max-systems",
        type=int,
        default=12,
        help="designed systems to show in the page (default 12)",
    )


def run(args: argparse.Namespace) -> int:
    """Build the report and print where it went."""
    from metaagentx.report import build_report

    pair = None
    if args.pair:
        parts = [p.strip() for p in args.pair.split(",")]
        if len(parts) != 2 or not all(parts):
            raise SystemExit(f"--pair wants BEFORE,AFTER (two labels), got {args.pair!r}")
        pair = (parts[0], parts[1])
    out = build_report(
        args.run_dir, compare=args.compare, out=args.out, max_systems=args.max_systems, pair=pair
    )
    print(f"report: {out / 'report.html'}")
    print(f"summary: {out / 'summary.md'}")
    return 0
