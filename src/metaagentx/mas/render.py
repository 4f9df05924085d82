"""A designed MAS as a Mermaid ``graph TD``: from the script's AST, or from the recorded calls.

    print(mermaid_from_script(script))   # agents, how the blocks connect them, the answer
    print(mermaid_from_calls(execution.calls))   # who spoke after whom, numbered in call order

Paste the text into any Mermaid renderer (GitHub markdown renders ```mermaid blocks).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from metaagentx.types import Call

QUESTION_ID, ANSWER_ID = "question", "answer"
BLOCKS = ("single", "reflection", "ensemble", "debate", "solver_tester", "router")


def node_id(name: str) -> str:
    """A Mermaid-safe node id for an agent name (letters, digits, underscore; never a keyword)."""
    return "a_" + (re.sub(r"\W", "_", name, flags=re.ASCII) or "_")


def _label(text: str) -> str:
    return text.replace('"', "#quot;").replace("\n", " ")[:60]


class _Graph:
    def __init__(self) -> None:
        self.nodes: dict[str, str] = {QUESTION_ID: f'{QUESTION_ID}(["QUESTION"])'}
        self.edges: list[tuple[str, str, str, bool]] = []

    def agent(self, name: str) -> str:
        nid = node_id(name)
        self.nodes.setdefault(nid, f'{nid}["{_label(name)}"]')
        return nid

    def special(self, nid: str, text: str, shape: tuple[str, str] = ("{", "}")) -> str:
        self.nodes.setdefault(nid, f'{nid}{shape[0]}"{_label(text)}"{shape[1]}')
        return nid

    def edge(self, src: str, dst: str, label: str = "", dotted: bool = False) -> None:
        if (src, dst, label, dotted) not in self.edges:
            self.edges.append((src, dst, label, dotted))

    def text(self) -> str:
        lines = ["graph TD", *(f"  {n}" for n in self.nodes.values())]
        for src, dst, label, dotted in self.edges:
            arrow = "-.->" if dotted else "-->"
            lines.append(f"  {src} {arrow}{f'|{_label(label)}|' if label else ''} {dst}")
        return "\n".join(lines) + "\n"


def _fstring(node: ast.JoinedStr, loop_var: str | None, value: int | None) -> str:
    out = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            out.append(str(part.value))
        elif (
            isinstance(part, ast.FormattedValue)
            and isinstance(part.value, ast.Name)
            and part.value.id == loop_var
            and value is not None
        ):
            out.append(str(value))
        else:
            out.append("?")
    return "".join(out)


def _agent_name(call: ast.Call, loop_var: str | None = None, value: int | None = None) -> str:
    arg = (
        call.args[0]
        if call.args
        else next((k.value for k in call.keywords if k.arg == "name"), None)
    )
    if isinstance(arg, ast.Constant):
        return str(arg.value)
    if isinstance(arg, ast.JoinedStr):
        return _fstring(arg, loop_var, value)
    return "agent"


def _func_name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


class _Resolver:
    """Maps expressions to the agent names they denote, tracking simple assignments."""

    def __init__(self) -> None:
        self.env: dict[str, list[str]] = {}
        self.dicts: dict[str, ast.Dict] = {}

    def comp(self, node: ast.ListComp) -> list[str]:
        gen = node.generators[0]
        if not (isinstance(node.elt, ast.Call) and _func_name(node.elt) == "Agent"):
            return []
        target = gen.target.id if isinstance(gen.target, ast.Name) else None
        it = gen.iter
        if (
            isinstance(it, ast.Call)
            and _func_name(it) == "range"
            and all(isinstance(a, ast.Constant) and isinstance(a.value, int) for a in it.args)
            and 1 <= len(it.args) <= 2
        ):
            bounds = [a.value for a in it.args]
            lo, hi = (0, bounds[0]) if len(bounds) == 1 else bounds
            return [_agent_name(node.elt, target, k) for k in range(lo, min(hi, lo + 8))]
        return [_agent_name(node.elt)]

    def resolve(self, node: ast.AST | None) -> list[str]:
        if isinstance(node, ast.Name):
            return list(self.env.get(node.id, []))
        if isinstance(node, ast.Call) and _func_name(node) == "Agent":
            return [_agent_name(node)]
        if isinstance(node, (ast.List, ast.Tuple)):
            return [n for e in node.elts for n in self.resolve(e)]
        if isinstance(node, ast.ListComp):
            return self.comp(node)
        return []

    def mentioned(self, node: ast.AST) -> list[str]:
        """Agents named anywhere inside ``node`` (e.g. a lambda route)."""
        names: list[str] = []
        for sub in ast.walk(node):
            for n in self.resolve(sub) if isinstance(sub, (ast.Name, ast.Call)) else []:
                if n not in names:
                    names.append(n)
        return names

    def assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if isinstance(target, ast.Name):
                agents = self.resolve(node.value)
                if agents:
                    self.env[target.id] = agents
                if isinstance(node.value, ast.Dict):
                    self.dicts[target.id] = node.value


def _arg(call: ast.Call, index: int, name: str) -> ast.AST | None:
    if len(call.args) > index:
        return call.args[index]
    return next((k.value for k in call.keywords if k.arg == name), None)


def _block(g: _Graph, r: _Resolver, call: ast.Call, kind: str, n: int) -> list[str]:
    """Draw one block call; return the node ids that produce its answer."""
    ids = lambda node: [g.agent(a) for a in r.resolve(node)]  # noqa: E731
    if kind == "single":
        agents = ids(_arg(call, 0, "agent"))
    elif kind in ("reflection", "solver_tester"):
        agents = ids(_arg(call, 0, "solver"))
        helpers = ids(_arg(call, 1, "critic" if kind == "reflection" else "tester"))
        for s in agents:
            for h in helpers:
                if kind == "solver_tester":
                    tool = g.special("tool_run_python", "run_python", ("[", "]"))
                    g.edge(s, tool, "program")
                    g.edge(tool, h, "output")
                else:
                    g.edge(s, h, "solution")
                g.edge(h, s, "feedback", dotted=True)
    elif kind in ("ensemble", "debate"):
        agents = ids(_arg(call, 0, "agents"))
        if kind == "debate":
            for a, b in zip(agents, agents[1:] + agents[:1]):
                if a != b:
                    g.edge(a, b, "debate", dotted=True)
        judge = ids(_arg(call, 3 if kind == "debate" else 2, "judge"))
        vote = g.special(f"vote_{n}", "majority vote")
        for a in agents:
            g.edge(QUESTION_ID, a)
            g.edge(a, vote)
        for j in judge:
            g.edge(vote, j, "disagree" if kind == "ensemble" else "", dotted=kind == "ensemble")
        return judge + ([vote] if kind == "ensemble" or not judge else [])
    else:  # router
        agents = ids(_arg(call, 0, "classifier"))
        routes = _arg(call, 1, "routes")
        routes = r.dicts.get(routes.id, routes) if isinstance(routes, ast.Name) else routes
        outs: list[str] = []
        for c in agents:
            g.edge(QUESTION_ID, c)
        if isinstance(routes, ast.Dict):
            for key, value in zip(routes.keys, routes.values):
                label = key.value if isinstance(key, ast.Constant) else "route"
                for target in [g.agent(a) for a in r.mentioned(value)]:
                    for c in agents:
                        g.edge(c, target, str(label))
                    outs.append(target)
        return outs
    for a in agents:
        g.edge(QUESTION_ID, a)
    return agents


def mermaid_from_script(script: str) -> str:
    """Mermaid ``graph TD`` of a designer script: agents, block structure, direct asks, the
    answer. Example: ``mermaid_from_script(template_script("debate", task))``."""
    g, r = _Graph(), _Resolver()
    try:
        tree = ast.parse(script or "")
    except (SyntaxError, ValueError):
        g.special("invalid", "script does not parse", ("[", "]"))
        g.edge(QUESTION_ID, "invalid")
        return g.text()
    in_lambda = {
        id(sub)
        for lam in ast.walk(tree)
        if isinstance(lam, ast.Lambda)
        for sub in ast.walk(lam.body)
    }  # router routes: drawn by the router
    nodes = sorted(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.Assign, ast.Call)) and id(n) not in in_lambda
        ),  # inner calls first: submit(single(...))
        key=lambda n: (n.end_lineno, n.end_col_offset, isinstance(n, ast.Assign)),
    )
    last: list[str] = [QUESTION_ID]
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Assign):
            r.assign(node)
            continue
        kind = _func_name(node)
        if kind in BLOCKS:
            last = _block(g, r, node, kind, i) or last
        elif kind == "ask" and isinstance(node.func, ast.Attribute):
            for a in [g.agent(x) for x in r.resolve(node.func.value)]:
                for src in last:
                    g.edge(src, a)
                last = [a]
        elif kind == "ask_all":
            targets = [g.agent(x) for x in r.resolve(_arg(node, 0, "agents"))]
            for src in last:
                for t in targets:
                    g.edge(src, t)
            last = targets or last
        elif kind == "run_python":
            tool = g.special("tool_run_python", "run_python", ("[", "]"))
            for src in last:
                g.edge(src, tool, "code")
        elif kind == "submit":
            answer = g.special(ANSWER_ID, "answer", ("([", "])"))
            for src in last:
                if src != QUESTION_ID:
                    g.edge(src, answer)
    return g.text()


def _asked(call: Call) -> str | None:
    users = [m.get("content") for m in call.messages if m.get("role") == "user"]
    return users[-1] if users else None


def mermaid_from_calls(calls: Sequence[Call]) -> str:
    """Mermaid ``graph TD`` of recorded calls: question -> first agent -> ... -> answer, each
    edge labelled with the numbers of the calls it led to (``1, 3``). Consecutive calls of
    different agents asked the same message (an ensemble's fan-out) are drawn side by side."""
    g = _Graph()
    groups: list[list[tuple[int, str]]] = []
    asked: list[str | None] = []
    for k, call in enumerate(calls, start=1):
        nid, message = g.agent(call.agent), _asked(call)
        if (
            groups
            and message is not None
            and message == asked[-1]
            and nid not in [n for _, n in groups[-1]]
        ):
            groups[-1].append((k, nid))
        else:
            groups.append([(k, nid)])
            asked.append(message)
    order: dict[tuple[str, str], list[int]] = {}
    prev = [QUESTION_ID]
    for group in groups:
        for k, nid in group:
            for src in prev:
                order.setdefault((src, nid), []).append(k)
        prev = [nid for _, nid in group]
    if calls:
        answer = g.special(ANSWER_ID, "answer", ("([", "])"))
        for src in prev:
            order.setdefault((src, answer), [])
    for (src, dst), nums in order.items():
        g.edge(src, dst, ", ".join(map(str, nums)))
    return g.text()
