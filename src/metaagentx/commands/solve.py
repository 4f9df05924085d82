"""Solve one question with a multi-agent system the model designs (or a built-in template).

    metaagentx solve "What is 12 * 13?"
    metaagentx solve "What is 12 * 13?" --structure reflection --json
    metaagentx solve "Read n and print n squared." --kind code --model Qwen/Qwen3-0.6B

The policy (the embedded SmolLM2-135M unless --model) writes a script as the Designer; the
script runs in the sandbox and the same model plays every agent. Prints the script, its
Mermaid graph, each agent's exchange and the final answer; --json prints one JSON object.
Token limits default to small values so a CPU run finishes in a minute or two; raise them
with --max-new-tokens / --designer-tokens. A design that fails the static check falls back to
the "single" template (said so in the output) unless --no-fallback.
"""

from __future__ import annotations

import argparse
import json
import sys

STRUCTURES = ("single", "reflection", "ensemble", "debate", "solver_tester", "router")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("question", help="the problem to solve")
    p.add_argument("--model", default=None, help="model name/path (overrides model.name)")
    p.add_argument(
        "--structure",
        choices=STRUCTURES,
        default=None,
        help="run this built-in template instead of a designed MAS",
    )
    p.add_argument(
        "--kind",
        choices=("math", "code"),
        default="math",
        help="math: submit a final answer; code: submit a program (default math)",
    )
    p.add_argument("--json", action="store_true", help="print machine-readable JSON only")
    p.add_argument("--config", default=None, help="TOML config (defaults when omitted)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument(
        "--temperature", type=float, default=0.0, help="sampling temperature (default 0 = greedy)"
    )
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="tokens per agent call (default min(generation.executor_max_tokens, 128))",
    )
    p.add_argument(
        "--designer-tokens",
        type=int,
        default=None,
        help="tokens of the designer call (default min(generation.designer_max_tokens, 256))",
    )
    p.add_argument(
        "--max-calls",
        type=int,
        default=None,
        help="agent calls allowed (default min(mas.max_calls, 5))",
    )
    p.add_argument(
        "--no-fallback",
        action="store_true",
        help="report a rejected design instead of running the single template",
    )


def _settings(args: argparse.Namespace, cfg):
    from dataclasses import replace

    from metaagentx.backends.base import SamplingParams

    g = cfg.generation
    executor = SamplingParams(
        temperature=args.temperature,
        top_p=g.top_p,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens or min(g.executor_max_tokens, 128),
    )
    designer = replace(
        executor, max_new_tokens=args.designer_tokens or min(g.designer_max_tokens, 256)
    )
    # generation happens inside the script's wall clock: give a CPU run room
    mas = replace(
        cfg.mas,
        max_calls=args.max_calls or min(cfg.mas.max_calls, 5),
        timeout_s=max(cfg.mas.timeout_s, 900.0),
    )
    return executor, designer, mas


async def _solve(args: argparse.Namespace, task, gen, executor, designer, mas) -> dict:
    from metaagentx.mas.runtime import design, execute
    from metaagentx.mas.templates import template_script
    from metaagentx.types import Design

    fallback = None
    if args.structure:
        d = Design(script=template_script(args.structure, task), structure=args.structure)
    else:
        d = await design(task, gen, sampling=designer)
    script = d.script
    if d.rejected and not args.no_fallback:
        fallback = "single"
        script = template_script("single", task)
    execution = await execute(script, task, gen, mas=mas, sampling=executor)
    return {"design": d, "script": script, "fallback": fallback, "execution": execution}


def _record(question: str, model: str, result: dict) -> dict:
    from metaagentx.mas.render import mermaid_from_calls, mermaid_from_script

    d, ex = result["design"], result["execution"]
    return {
        "question": question,
        "model": model,
        "design": {
            "source": "template" if d.call is None else "designed",
            "structure": d.structure,
            "rejected": d.rejected,
            "script": d.script,
            "designer_text": d.call.text if d.call else None,
        },
        "fallback": result["fallback"],
        "script": result["script"],
        "mermaid_script": mermaid_from_script(result["script"]),
        "mermaid_calls": mermaid_from_calls(ex.calls),
        "outcome": ex.outcome.value,
        "answer": ex.answer,
        "reason": ex.reason,
        "calls": len(ex.calls),
        "tool_runs": ex.tool_runs,
        "wall_s": round(ex.wall_s, 2),
        "tokens_in": sum(len(c.prompt_ids) for c in ex.calls),
        "tokens_out": sum(len(c.response_ids) for c in ex.calls),
        "exchanges": [
            {
                "agent": c.agent,
                "role": c.role,
                "messages": c.messages,
                "text": c.text,
                "finish_reason": c.finish_reason,
                "tokens_out": len(c.response_ids),
            }
            for c in ex.calls
        ],
        "stdout": ex.stdout,
    }


def _print(rec: dict) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.panel import Panel
    from rich.syntax import Syntax

    con = Console()
    con.print(Panel(escape(rec["question"]), title="Question", border_style="cyan"))
    d = rec["design"]
    if d["designer_text"] is not None:
        con.print(
            Panel(
                escape(d["designer_text"] or "(empty)"),
                title="Designer output",
                border_style="magenta",
            )
        )
    status = f"structure: {d['structure']} ({d['source']})"
    if d["rejected"]:
        status += f" - REJECTED: {d['rejected']}"
    if rec["fallback"]:
        status += f" - running the {rec['fallback']!r} template instead"
    con.print(f"[bold]{escape(status)}[/bold]")
    con.print(Panel(Syntax(rec["script"], "python", word_wrap=True), title="Script"))
    con.print(Panel(escape(rec["mermaid_script"].rstrip()), title="Mermaid (script)"))
    for k, ex in enumerate(rec["exchanges"], start=1):
        asked = ex["messages"][-1]["content"] if ex["messages"] else ""
        body = f"[dim]asked:[/dim] {escape(_clip(asked))}\n[dim]replied:[/dim] {escape(ex['text'])}"
        con.print(
            Panel(
                body,
                title=f"#{k} {escape(ex['agent'])} ({ex['tokens_out']} tokens, "
                f"{ex['finish_reason']})",
                border_style="green",
            )
        )
    con.print(Panel(escape(rec["mermaid_calls"].rstrip()), title="Mermaid (calls)"))
    if rec["stdout"].strip():
        con.print(Panel(escape(rec["stdout"].rstrip()), title="Script output"))
    tail = f"outcome: {rec['outcome']}" + (f" ({rec['reason']})" if rec["reason"] else "")
    con.print(
        Panel(
            f"{escape(str(rec['answer']))}\n[dim]{escape(tail)}; {rec['calls']} calls, "
            f"{rec['tokens_out']} tokens out, {rec['wall_s']} s[/dim]",
            title="Final answer",
            border_style="bold yellow",
        )
    )


def _clip(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text) - limit} more chars]"


def run(args: argparse.Namespace) -> int:
    """Design (or take a template), run, and print the result."""
    import asyncio

    from metaagentx.backends import load_generator
    from metaagentx.config import load_config
    from metaagentx.types import Task

    overrides = list(args.overrides)
    if args.model:
        overrides.append(f"--model.name={args.model}")
    cfg = load_config(args.config, overrides)
    executor, designer, mas = _settings(args, cfg)
    if not args.json:
        print(f"loading {cfg.model.name} ...", file=sys.stderr)
    gen = load_generator(cfg)
    task = Task(id="cli", prompt=args.question, kind=args.kind)
    result = asyncio.run(_solve(args, task, gen, executor, designer, mas))
    rec = _record(args.question, cfg.model.name, result)
    if args.json:
        print(json.dumps(rec, indent=2, ensure_ascii=False))
    else:
        _print(rec)
    return 0
