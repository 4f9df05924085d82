"""Run report: one self-contained HTML page, PNG figures and a Markdown summary.

    metaagentx report RUN_DIR [--compare OTHER] [--out DIR]

Reads a run folder: ``metrics.jsonl`` (training steps), ``eval/<label>/items.jsonl``
(evaluations) and ``samples/step_XXXXXX.jsonl`` (training episodes); any of them may be
missing and the report says what it lacked. Writes to ``DIR`` (default ``RUN_DIR/report``):
``report.html`` (figures embedded as base64, graphs as inline SVG, a few lines of inline
JavaScript for filtering: it opens offline), ``figures/*.png`` and ``summary.md``.

Attribution compares the last evaluation of ``OTHER`` (a run folder, an eval folder or an
items.jsonl) with the last evaluation of ``RUN_DIR``; without ``--compare`` it compares the
first and last evaluation labels of ``RUN_DIR`` (natural order), when it has two;
``--pair BEFORE,AFTER`` names the two labels instead.
"""

from __future__ import annotations

import base64
import html
import json
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from metaagentx import analysis as A
from metaagentx import report_figures as F
from metaagentx.report_svg import mermaid_to_svg
from metaagentx.types import Call

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:0 18px;color:#222}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:3px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px}
th{background:#f2f2f2}td.num{text-align:right}img.fig{max-width:100%;border:1px solid #eee}
pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:12px;max-height:360px}
details.system{border:1px solid #ccc;border-radius:6px;margin:8px 0;padding:4px 10px}
details.system summary{cursor:pointer;font-weight:600}.ok{color:#1a7f37}.bad{color:#b42318}
.graphs{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}.graphs figure{margin:0}
figcaption{font-size:12px;color:#555}.note{color:#666;font-size:13px}
.x{border-left:3px solid #8fb3de;margin:6px 0;padding:2px 8px}.x .sys{color:#666;font-size:12px}
svg.mermaid-svg .node{fill:#eef4fb;stroke:#4c72b0;stroke-width:1.3}
svg.mermaid-svg text{font:13px system-ui,sans-serif;text-anchor:middle;fill:#222}
svg.mermaid-svg .edge{fill:none;stroke:#555;stroke-width:1.3}
svg.mermaid-svg rect.elabel{fill:#fff;stroke:none}svg.mermaid-svg text.elabel{font-size:11px}
"""
JS = """
document.getElementById('filter').addEventListener('change', function (e) {
  var v = e.target.value;
  document.querySelectorAll('details.system').forEach(function (el) {
    el.style.display = (v === 'all' || el.dataset.structure === v) ? '' : 'none';
  });
});
document.body.dataset.ready = document.querySelectorAll('svg.mermaid-svg').length;
"""


@dataclass
class RunData:
    run_dir: Path
    metrics: list[dict]
    evals: dict[str, list[dict]]  # display label -> items (the run's, then --compare's)
    pair: tuple[str, str] | None  # (before, after) labels for attribution
    train_items: list[dict]  # one per execution of the newest training samples
    notes: list[str] = field(default_factory=list)
    compare_metrics: list[dict] = field(default_factory=list)  # --compare's metrics.jsonl
    compare_name: str = ""


def load_run(
    run_dir: str | Path, compare: str | Path | None = None, pair: tuple[str, str] | None = None
) -> RunData:
    """Read everything the report needs; what is missing becomes a note, not an error.
    ``pair`` names the (before, after) evaluation labels for attribution explicitly."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run folder not found: {run_dir}")
    # `metaagentx demo` keeps its RL run in RUN_DIR/rl beside RUN_DIR/eval
    train_dir = run_dir / "rl" if (run_dir / "rl" / "metrics.jsonl").is_file() else run_dir
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = A.read_metrics(train_dir)
        evals = A.read_eval(run_dir)
        baseline = A.read_eval(compare) if compare else {}
        train = A.items_from_episodes(A.read_samples(train_dir))
        other = A.read_metrics(compare) if compare and Path(compare).is_dir() else []
    notes = [str(w.message) for w in caught]
    if compare and not baseline:
        raise FileNotFoundError(f"--compare {compare}: no items.jsonl found there")
    if baseline:
        tag = Path(compare).name if (Path(compare) / "eval").is_dir() else "baseline"
        baseline = {f"{tag}:{k}": v for k, v in baseline.items()}
    labels = [*baseline, *evals]
    if pair is not None:
        for label in pair:
            if label not in labels:
                raise ValueError(
                    f"--pair: no evaluation labelled {label!r}; "
                    f"choose from {', '.join(labels) or 'none'}"
                )
    elif baseline and evals:
        pair = (list(baseline)[-1], list(evals)[-1])
    elif len(evals) >= 2:
        pair = (list(evals)[0], list(evals)[-1])
    for what, missing in (
        ("metrics.jsonl", not metrics),
        ("eval/<label>/items.jsonl", not evals),
        ("samples/step_*.jsonl", not train),
    ):
        if missing:
            notes.append(f"{what}: none found in {run_dir.name}")
    return RunData(
        run_dir,
        metrics,
        {**baseline, **evals},
        pair,
        train,
        notes,
        other,
        Path(compare).name if compare else "",
    )


# -- tables ---------------------------------------------------------------------------------
def _md(headers: list[str], rows: list[list]) -> str:
    def cell(v) -> str:
        return f"{v:.2f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v).replace("|", "\\|") for v in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _md_to_html(md: str) -> str:
    """Markdown pipe tables and plain lines (as notes) -> HTML, in their order."""
    out: list[str] = []
    row = 0  # position inside the current table (0 = header, 1 = separator)
    for line in md.splitlines():
        if not line.startswith("|"):
            if row:
                out.append("</table>")
            row = 0
            if line.strip():
                out.append(f'<p class="note">{html.escape(line)}</p>')
            continue
        if row == 0:
            out.append("<table>")
        if row != 1:
            cells = [c.strip().replace("\\|", "|") for c in line.strip("|").split(" | ")]
            tag = "th" if row == 0 else "td"
            out.append(
                "<tr>"
                + "".join(
                    f"<{tag}{' class=num' if tag == 'td' and k else ''}>{html.escape(c)}</{tag}>"
                    for k, c in enumerate(cells)
                )
                + "</tr>"
            )
        row += 1
    return "".join(out) + ("</table>" if row else "")


def tables(data: RunData) -> dict[str, str]:
    """Section name -> Markdown (tables and short notes), shared by summary.md and the HTML."""
    t: dict[str, str] = {}
    if data.evals:
        rows = {label: A.accuracy_by_benchmark(items) for label, items in data.evals.items()}
        t["accuracy"] = A.paper_table(rows, reference=True)
        head = ["Evaluation", "Benchmark", *A.STRUCTURES]
        t["structures"] = _md(
            head,
            [
                [label, b, *(d.get(s, 0) for s in A.STRUCTURES)]
                for label, items in data.evals.items()
                for b, d in A.structure_distribution(items).items()
            ],
        )
        t["cost"] = _md(
            [
                "Evaluation",
                "Structure",
                "Items",
                "Tasks",
                "Accuracy %",
                "Tokens/task",
                "Calls/task",
            ],
            [
                [
                    label,
                    s,
                    c["items"],
                    c["tasks"],
                    100 * c["accuracy"],
                    round(c["tokens_per_task"]),
                    c["calls_per_task"],
                ]
                for label, items in data.evals.items()
                for s, c in A.cost_by_structure(items).items()
            ],
        )
    sources = dict(data.evals)
    if data.train_items:
        steps = sorted({i["step"] for i in data.train_items})
        sources[f"training samples (step {', '.join(map(str, steps))})"] = data.train_items
    if sources:
        t["diversity"] = _diversity_table(sources)
    if data.pair:
        t["attribution"] = _attribution_table(data)
    return t


def _diversity_table(sources: dict[str, list[dict]]) -> str:
    divs = {label: A.diversity(items) for label, items in sources.items()}
    return _md(
        [
            "Source",
            "Systems",
            "Agents/system",
            "Distinct role names",
            "Agents with a unique system prompt",
            "Calls/execution",
            "Most common roles",
        ],
        [
            [
                label,
                d["systems"],
                d["agents_per_system"],
                d["distinct_role_names"],
                f"{100 * d['unique_prompt_fraction']:.1f}%",
                d["calls_per_execution"],
                ", ".join(f"{n} ({c})" for n, c in d["top_role_names"][:5]),
            ]
            for label, d in divs.items()
        ],
    )


def _attribution_table(data: RunData) -> str:
    before, after = data.pair or ("", "")
    att = A.attribution(data.evals[before], data.evals[after])
    share = "–" if att.design_share is None else f"{100 * att.design_share:.1f}%"
    md = _md(
        ["Outcome", "Tasks", "Meaning"],
        [
            ["design", att.counts["design"], "newly solved with a different structure"],
            ["execution", att.counts["execution"], "newly solved with the same structure"],
            ["newly_failed", att.counts["newly_failed"], "solved before, not after"],
            ["both_solved", att.counts["both_solved"], ""],
            ["both_failed", att.counts["both_failed"], ""],
        ],
    ) + (
        f"\nFrom `{before}` to `{after}`: share of the gain from design: {share}; "
        f"tasks in only one of them: {att.unmatched}.\n"
    )
    md += "\n" + _md(
        ["Benchmark", *A.OUTCOMES], [[b, *c.values()] for b, c in att.by_benchmark().items()]
    )
    if att.structure_changes:
        md += "\n" + _md(
            ["Structure change", "Tasks"], [[k, v] for k, v in att.structure_changes.items()]
        )
    return md


# -- figures --------------------------------------------------------------------------------
def figures(data: RunData, out: Path) -> dict[str, Path]:
    """Write every figure there is data for; section name -> PNG path."""
    d = out / "figures"
    made = {
        "curves": F.training_curves(
            data.metrics, d / "curves.png", other=data.compare_metrics, other_name=data.compare_name
        ),
        "structures_training": F.structure_over_training(
            data.metrics, d / "structures_training.png"
        ),
        "structures": F.structure_mix(
            {k: A.structure_distribution(v) for k, v in data.evals.items()}, d / "structure_mix.png"
        ),
        "cost": F.cost_accuracy(
            {k: A.cost_by_structure(v) for k, v in data.evals.items()}, d / "cost_accuracy.png"
        ),
    }
    if data.pair:
        att = A.attribution(data.evals[data.pair[0]], data.evals[data.pair[1]])
        made["attribution"] = F.attribution_bars(
            att.counts, f"Attribution: {data.pair[0]} -> {data.pair[1]}", d / "attribution.png"
        )
    return {k: v for k, v in made.items() if v is not None}


# -- designed systems -----------------------------------------------------------------------
def pick_systems(data: RunData, limit: int = 12) -> list[dict]:
    """Up to ``limit`` items to browse: from the last evaluation one per structure first, then
    the rest in order; then a few training executions."""
    pool = list(data.evals.values())[-1] if data.evals else []
    first, rest, seen = [], [], set()
    for item in pool:
        s = A.item_structure(item)
        (rest if s in seen else first).append(item)
        seen.add(s)
    chosen = (first + rest)[: max(0, limit - min(4, len(data.train_items)))]
    return chosen + data.train_items[: limit - len(chosen)]


def _graph(kind: str, make) -> str:
    try:
        text = make()
    except Exception as e:  # a graph that cannot be drawn must not sink the whole report
        return (
            f"<figure><figcaption>{kind}: not drawn ({html.escape(repr(e))})</figcaption></figure>"
        )
    try:
        body = mermaid_to_svg(text)
    except ValueError as e:
        body = f"<pre>{html.escape(text)}</pre><p class=note>{html.escape(str(e))}</p>"
    return (
        f"<figure>{body}<figcaption>{kind}</figcaption>"
        f"<details><summary>Mermaid</summary><pre>{html.escape(text)}</pre></details></figure>"
    )


def _clip(text: str, n: int = 2500) -> str:
    text = str(text or "")
    return text if len(text) <= n else text[:n] + f"\n… ({len(text) - n} more characters)"


def system_html(item: dict, open_: bool = False) -> str:
    """One designed system: graphs (from the script and from the calls), script, exchanges."""
    from metaagentx.mas.render import mermaid_from_calls, mermaid_from_script

    s = A.item_structure(item)
    ok = A.is_correct(item)
    ex = [e for e in item.get("exchanges") or [] if e.get("role", "executor") != "designer"]
    calls = [
        Call(
            role="executor",
            agent=str(e.get("agent", "?")),
            messages=list(e.get("messages") or []),
            prompt_ids=[],
            response_ids=[],
            logprobs=[],
            finish_reason="stop",
            text=str(e.get("text", "")),
        )
        for e in ex
    ]
    head = (
        f"[{s}] {item.get('benchmark', '?')} / {item.get('task_id', '?')} · "
        f"{item.get('label', '')} · reward {float(item.get('reward', 0)):.2f} · "
        f"{len(ex)} calls · {item.get('outcome', '')}"
    )
    parts = [
        f'<details class="system" data-structure="{s}"{" open" if open_ else ""}>'
        f'<summary><span class="{"ok" if ok else "bad"}">{"✔" if ok else "✘"}</span> '
        f"{html.escape(head)}</summary>"
    ]
    parts.append(
        '<div class="graphs">'
        + _graph(
            "designed (from the script)", lambda: mermaid_from_script(item.get("script") or "")
        )
        + _graph("as run (from the recorded calls)", lambda: mermaid_from_calls(calls))
        + "</div>"
    )
    parts.append(f"<h4>Script</h4><pre>{html.escape(_clip(item.get('script') or '(none)'))}</pre>")
    parts.append("<h4>Exchanges</h4>")
    for k, e in enumerate(ex, start=1):
        msgs = e.get("messages") or []
        system = next((m.get("content", "") for m in msgs if m.get("role") == "system"), "")
        user = next((m.get("content", "") for m in reversed(msgs) if m.get("role") == "user"), "")
        parts.append(
            f'<div class="x"><b>{k}. {html.escape(str(e.get("agent", "?")))}</b>'
            f'<div class="sys">system: {html.escape(_clip(system, 300))}</div>'
            f"<pre>▶ {html.escape(_clip(user, 1500))}</pre>"
            f"<pre>◀ {html.escape(_clip(e.get('text', '')))}</pre></div>"
        )
    reason = item.get("failure_reason")
    parts.append(
        f"<p><b>Answer:</b> <code>{html.escape(_clip(str(item.get('answer')), 500))}"
        f"</code>{' · ' + html.escape(str(reason)) if reason else ''}</p></details>"
    )
    return "".join(parts)


# -- assembly -------------------------------------------------------------------------------
SECTIONS = [
    ("accuracy", "Accuracy (paper layout)"),
    ("curves", "Training curves"),
    ("structures_training", "Structures during training"),
    ("structures", "Structure mix per benchmark"),
    ("attribution", "Where the gain came from: design or execution"),
    ("diversity", "Diversity of the designed systems"),
    ("cost", "Cost against accuracy per structure"),
]


def _img(path: Path, alt: str) -> str:
    b64 = base64.b64encode(path.read_bytes()).decode()
    return f'<img class="fig" alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def render_html(
    data: RunData, tabs: dict[str, str], figs: dict[str, Path], systems: list[dict]
) -> str:
    """The whole page as one string (no external resources)."""
    body = [
        f"<h1>metaagentx run report: {html.escape(data.run_dir.name)}</h1>",
        f'<p class="note">Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}; '
        f"evaluations: {html.escape(', '.join(data.evals) or 'none')}; "
        f"training steps: {len(data.metrics)}.</p>",
    ]
    body += [f'<p class="note">Note: {html.escape(n)}</p>' for n in data.notes]
    for key, title in SECTIONS:
        if key not in figs and key not in tabs:
            continue
        body.append(f'<h2 id="{key}">{title}</h2>')
        if key in figs:
            body.append(_img(figs[key], title))
        if key in tabs:
            body.append(_md_to_html(tabs[key]))
    structures = sorted({A.item_structure(i) for i in systems})
    options = "".join(f"<option>{s}</option>" for s in structures)
    body.append(
        '<h2 id="systems">Designed systems</h2><label>Structure: <select id="filter">'
        f'<option value="all">all</option>{options}</select></label>'
    )
    body += [system_html(item, open_=(k == 0)) for k, item in enumerate(systems)]
    if not systems:
        body.append('<p class="note">No evaluated or sampled systems in this run.</p>')
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>metaagentx report: {html.escape(data.run_dir.name)}</title>"
        f"<style>{CSS}</style></head><body>"
        + "\n".join(body)
        + f"<script>{JS}</script></body></html>\n"
    )


def render_summary(data: RunData, tabs: dict[str, str], figs: dict[str, Path], out: Path) -> str:
    """summary.md: the same tables, figures linked relatively."""
    lines = [f"# metaagentx run report: {data.run_dir.name}", ""]
    lines += [f"- note: {n}" for n in data.notes]
    if data.metrics:
        last = data.metrics[-1]
        lines.append(
            f"- training steps: {len(data.metrics)}; last step {last['step']}: "
            f"reward {last.get('reward_mean')}, accuracy {last.get('accuracy')}, "
            f"phase {last.get('phase')}"
        )
    for key, title in SECTIONS:
        if key in figs or key in tabs:
            lines += ["", f"## {title}", ""]
            if key in figs:
                lines += [f"![{title}]({figs[key].relative_to(out).as_posix()})", ""]
            lines.append(tabs.get(key, "").rstrip())
    return "\n".join(lines).rstrip() + "\n"


def build_report(
    run_dir: str | Path,
    *,
    compare: str | Path | None = None,
    out: str | Path | None = None,
    max_systems: int = 12,
    pair: tuple[str, str] | None = None,
) -> Path:
    """Write report.html, figures/*.png, summary.md and analysis.json; return the folder."""
    data = load_run(run_dir, compare, pair)
    out = Path(out) if out else data.run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    tabs, figs = tables(data), figures(data, out)
    systems = pick_systems(data, max_systems)
    (out / "report.html").write_text(render_html(data, tabs, figs, systems), encoding="utf-8")
    (out / "summary.md").write_text(render_summary(data, tabs, figs, out), encoding="utf-8")
    (out / "analysis.json").write_text(json.dumps(numbers(data), indent=1), encoding="utf-8")
    return out


def numbers(data: RunData) -> dict:
    """Every analysis as plain JSON (written to analysis.json beside the report)."""
    per = {
        label: {
            "accuracy": A.accuracy_by_benchmark(items),
            "structures": A.structure_distribution(items),
            "diversity": A.diversity(items),
            "cost": A.cost_by_structure(items),
        }
        for label, items in data.evals.items()
    }
    out: dict = {"run": data.run_dir.name, "notes": data.notes, "evaluations": per}
    if data.pair:
        att = A.attribution(data.evals[data.pair[0]], data.evals[data.pair[1]])
        out["attribution"] = {
            "before": data.pair[0],
            "after": data.pair[1],
            "counts": att.counts,
            "design_share": att.design_share,
            "by_benchmark": att.by_benchmark(),
            "unmatched": att.unmatched,
            "structure_changes": att.structure_changes,
        }
    return out
