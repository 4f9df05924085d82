"""Script extraction and the static check: every rejection reason, and what passes."""

from __future__ import annotations

import pytest

from metaagentx.mas.script import MAX_SCRIPT_CHARS, REJECTION_REASONS, check_script, extract_script


def test_extract_prefers_last_block_that_submits():
    text = (
        "Plan:\n```python\nsubmit(1)\n```\nbetter:\n```python\nsubmit(2)\n```\n"
        "notes:\n```python\nx = 3\n```\n"
    )
    assert extract_script(text) == "submit(2)"


def test_extract_without_submit_takes_last_block_and_tags_and_unclosed():
    assert extract_script("```python\na = 1\n```\n```py\nb = 2\n```") == "b = 2"
    assert extract_script("<script>\nsubmit(QUESTION)\n</script>") == "submit(QUESTION)"
    assert extract_script("<script>\n```python\nsubmit(1)\n```\n</script>") == "submit(1)"
    assert extract_script("ok ```python\nx = 1\nsubmit(x)") == "x = 1\nsubmit(x)"  # cut off
    # a bare fence after the script is usually its sample output, not the script
    assert extract_script("```python\nprint(3)\n```\nOutput:\n```\n3\n```") == "print(3)"


def test_extract_bare_code_and_nothing():
    assert extract_script("submit('7')") == "submit('7')"
    assert extract_script("The answer is 7.") is None
    assert extract_script("") is None
    assert extract_script(None) is None
    assert extract_script("```text\nnot python\n```") is None


@pytest.mark.parametrize(
    "code,reason",
    [
        (None, "no_script"),
        ("   \n", "no_script"),
        ("x = 1\n" * (MAX_SCRIPT_CHARS // 6 + 1) + "submit(x)", "too_long"),
        ("submit(\n", "syntax_error"),
        ("import os\nsubmit(1)", "forbidden_import"),
        ("from subprocess import run\nsubmit(1)", "forbidden_import"),
        ("from . import api\nsubmit(1)", "forbidden_import"),
        ("from metaagentx.mas import sandbox\nsubmit(1)", "forbidden_import"),
        ("submit(().__class__)", "dunder_access"),
        ("x = __builtins__\nsubmit(x)", "dunder_access"),
        ("submit('{0.__class__}'.format(1))", "dunder_access"),
        ("f = open('/etc/passwd')\nsubmit(f.read())", "forbidden_name"),
        ("submit(eval('1+1'))", "forbidden_name"),
        ("submit(getattr(1, 'real'))", "forbidden_name"),
        ("x = exec\nsubmit(1)", "forbidden_name"),
        ("a = Agent('a')\nprint(single(a, QUESTION))", "no_submit"),
    ],
)
def test_each_rejection_reason(code, reason):
    assert reason in REJECTION_REASONS
    assert check_script(code) == reason


def test_every_reason_is_reachable_or_set_by_design():
    # prompt_too_long is set by runtime.design() (tested there), the rest by check_script
    assert set(REJECTION_REASONS) == {
        "no_script",
        "too_long",
        "syntax_error",
        "forbidden_import",
        "dunder_access",
        "forbidden_name",
        "no_submit",
        "prompt_too_long",
    }


def test_allowed_scripts_pass():
    ok = [
        "import math, re, json\nfrom collections import Counter\nsubmit(math.sqrt(4))",
        "from metaagentx.mas.api import Agent, single, submit\n"
        "submit(single(Agent('s', 'p'), QUESTION))",
        "from metaagentx.mas import api\napi.submit(1)",
        "import metaagentx.mas.api\nmetaagentx.mas.api.submit(1)",
        "pattern = re.compile('x')\nsubmit(1)",  # attribute named compile is fine
        "def helper(q):\n    return q\nsubmit(helper(QUESTION))",
    ]
    for code in ok:
        assert check_script(code) is None, code
