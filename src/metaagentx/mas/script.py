"""Designer scripts: pull the script out of the designer's text and check it before it runs.

    code = extract_script(designer_text)      # None when there is no script
    reason = check_script(code)               # None = ok, else one of REJECTION_REASONS

The check is a first filter (the sandbox is the security boundary): it names why a script is
refused so the refusal can be counted and learned from. The API names (``Agent``, blocks,
``submit``, ``QUESTION``...) are predefined in a script, so it needs no import; importing them
from ``metaagentx.mas.api`` is allowed too. Stdlib-only, so the sandboxed child may import it.
"""

from __future__ import annotations

import ast
import re

# stdlib modules a script may import, besides the MAS API
ALLOWED_MODULES: tuple[str, ...] = (
    "math",
    "re",
    "json",
    "itertools",
    "functools",
    "collections",
    "statistics",
    "fractions",
    "random",
    "string",
)
API_MODULE = "metaagentx.mas.api"

# builtins a script may not name (they reach files, code objects or the interpreter's state)
FORBIDDEN_NAMES: frozenset[str] = frozenset(
    {
        "open",
        "exec",
        "eval",
        "compile",
        "__import__",
        "globals",
        "locals",
        "vars",
        "getattr",
        "setattr",
        "delattr",
        "input",
        "breakpoint",
        "exit",
        "quit",
        "help",
        "dir",
        "memoryview",
    }
)

MAX_SCRIPT_CHARS = 8000  # longer scripts are rejected as too_long
MAX_SCRIPT_LINES = 250

# reason -> what it means (the keys are the fixed set of rejection reasons)
REJECTION_REASONS: dict[str, str] = {
    "no_script": "no script could be found in the designer's output",
    "too_long": f"the script exceeds {MAX_SCRIPT_CHARS} characters or {MAX_SCRIPT_LINES} lines",
    "syntax_error": "the script is not valid Python",
    "forbidden_import": "the script imports a module outside the allow-list",
    "dunder_access": "the script names an attribute or variable containing '__'",
    "forbidden_name": "the script uses a forbidden builtin (open, exec, eval, getattr, ...)",
    "no_submit": "the script never calls submit(...)",
    "prompt_too_long": "the designer's prompt exceeds the model's limit (set by design())",
}

_SCRIPT_TAG_RE = re.compile(r"<script>(.*?)(?:</script>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[ \t]*(python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_FORMAT_DUNDER_RE = re.compile(r"\{[^{}]*__")  # "{0.__class__}".format(x) reaches attributes


def _candidates(text: str) -> list[tuple[int, bool, str]]:
    """(position, tagged as Python, body) of every script tag and code fence, in order."""
    found = []
    for m in _SCRIPT_TAG_RE.finditer(text):
        inner = _FENCE_RE.findall(m.group(1))  # <script>```python ...```</script>
        found.append((m.start(), True, inner[-1][1] if inner else m.group(1)))
    for m in _FENCE_RE.finditer(text):
        if not any(t.start() <= m.start() < t.end() for t in _SCRIPT_TAG_RE.finditer(text)):
            found.append((m.start(), m.group(1) is not None, m.group(2)))
    return sorted((pos, tagged, body.strip()) for pos, tagged, body in found if body.strip())


def extract_script(text: str | None) -> str | None:
    """The script in the designer's output, or None.

    Candidates are ```python (or ```py, or bare ```) fenced blocks and ``<script>...</script>``
    spans; an unclosed last fence or tag (output cut off) counts. The last candidate that
    calls ``submit(`` wins, else the last one marked as Python (tag or ```python), else the
    last bare fence (often the program's sample output). With no candidate, the whole text is
    the script when it parses as Python and calls ``submit(``.
    """
    if not text:
        return None
    found = _candidates(text)
    ranked = (
        [b for _, _, b in found if "submit(" in b],
        [b for _, t, b in found if t],
        [b for _, _, b in found],
    )
    for group in ranked:
        if group:
            return group[-1]
    stripped = text.strip()
    if "submit(" in stripped:
        try:
            ast.parse(stripped)
            return stripped
        except SyntaxError:
            return None
    return None


def _import_ok(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        if node.level or not node.module:
            return False
        if node.module == "metaagentx.mas":
            return all(a.name == "api" for a in node.names)
        return node.module == API_MODULE or node.module.split(".")[0] in ALLOWED_MODULES
    return all(a.name == API_MODULE or a.name.split(".")[0] in ALLOWED_MODULES for a in node.names)


def _names_in(node: ast.AST) -> list[str]:
    """Every identifier the node introduces or reads (variables, attributes, args, aliases)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword):
        return [node.arg] if node.arg else []
    if isinstance(node, ast.alias):
        return [node.name, node.asname or ""]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return ["__"] if _FORMAT_DUNDER_RE.search(node.value) else []
    return []


def _calls_submit(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "submit") or (
                isinstance(f, ast.Attribute) and f.attr == "submit"
            ):
                return True
    return False


def check_script(code: str | None) -> str | None:
    """None when ``code`` may run, else the first failing reason (keys of REJECTION_REASONS),
    checked in this order: no_script, too_long, syntax_error, forbidden_import, dunder_access,
    forbidden_name, no_submit.

    Blocks return answers and never submit, so a script must call ``submit`` itself.
    """
    if code is None or not code.strip():
        return "no_script"
    if len(code) > MAX_SCRIPT_CHARS or code.count("\n") + 1 > MAX_SCRIPT_LINES:
        return "too_long"
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):  # ValueError: null bytes
        return "syntax_error"
    nodes = list(ast.walk(tree))
    if any(isinstance(n, (ast.Import, ast.ImportFrom)) and not _import_ok(n) for n in nodes):
        return "forbidden_import"
    names = [name for n in nodes for name in _names_in(n)]
    if any("__" in name for name in names):
        return "dunder_access"
    if any(isinstance(n, ast.Name) and n.id in FORBIDDEN_NAMES for n in nodes):
        return "forbidden_name"
    if not _calls_submit(tree):
        return "no_submit"
    return None
