"""``metaagentx`` command line: one subcommand per module under ``metaagentx.commands``.

    metaagentx --help
    metaagentx generate --prompt "What is 2+3?"

Each command module is light to import (argparse only); heavy imports happen inside ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# command name -> module under metaagentx.commands defining add_arguments(parser) and run(args)
COMMANDS: dict[str, str] = {
    "eval": "eval",
    "sft-data": "sft_data",
    "sft": "sft",
    "demo": "demo",
    "train": "train",
    "report": "report",
    "solve": "solve",
    "generate": "generate",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="metaagentx",
        description="Train one language model to design and execute multi-agent systems.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"metaagentx.commands.{module_name}")
        doc = (module.__doc__ or "").strip().splitlines()
        p = sub.add_parser(
            name,
            help=doc[0] if doc else "",
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if getattr(args, "_module", None) is None:
        parser.print_help()
        return 2
    args.overrides = [e for e in extra if e.startswith("--") and "." in e.split("=")[0]]
    unknown = [e for e in extra if e not in args.overrides]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return int(args._module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
