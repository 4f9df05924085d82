"""Worker process for ``metaagentx.tasks.math``: verifies answers with math-verify.

Run as ``python -m metaagentx.tasks._math_worker`` by the parent pool (never by hand). Protocol:
one JSON object per line on stdin ``{"gold": str, "pred": str}``; one JSON line back on the
original stdout ``{"ok": bool, "reason": str}``; ``{"ping": true}`` is answered ``{"pong": true}``. It prints ``{"ready": true}`` once math-verify
is imported, so the parent's time limit covers only verification. Anything the libraries print
goes to stderr, so the protocol stream stays clean. The parent kills this process when a
verification runs past its time limit (math-verify's own signal-based timeout is switched off).
"""

from __future__ import annotations

import json
import os
import sys

# Comparison settings, chosen strictly: floats are compared after rounding to 6 decimals
# (so 0.5 == 1/2 but 0.333 != 1/3 and 203.9 != 204); integers and rationals exactly;
# symbolic expressions by simplification (no numeric tolerance); variables must match.
FLOAT_ROUNDING = 6
NUMERIC_PRECISION = 15
MEMORY_LIMIT_MB = 4096  # address-space cap: a runaway expression fails with MemoryError


def _parse_both(gold: str, pred: str):
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    configs = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    g = parse(f"\\boxed{{{gold}}}", extraction_config=configs, parsing_timeout=None)
    p = parse(f"\\boxed{{{pred}}}", extraction_config=configs, parsing_timeout=None)
    return g, p


def check(gold: str, pred: str) -> dict:
    """Verify ``pred`` against ``gold`` (both bare answers, no surrounding prose)."""
    from math_verify import verify

    g, p = _parse_both(gold, pred)
    if not g:
        return {"ok": False, "reason": "unparsable_reference"}
    if not p:
        same = pred.strip() == gold.strip()
        return {"ok": same, "reason": "correct" if same else "unparsable_answer"}
    ok = verify(
        g,
        p,
        float_rounding=FLOAT_ROUNDING,
        numeric_precision=NUMERIC_PRECISION,
        strict=True,
        timeout_seconds=None,
        raise_on_error=False,
    )
    return {"ok": bool(ok), "reason": "correct" if ok else "wrong"}


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # library prints end up on stderr
    sys.stdout = sys.stderr
    import logging
    import resource

    limit = MEMORY_LIMIT_MB * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    logging.disable(logging.CRITICAL)
    import math_verify  # noqa: F401  (warm the import before announcing readiness)

    proto.write('{"ready": true}\n')
    proto.flush()
    for line in sys.stdin:
        job = json.loads(line)
        if job.get("ping"):  # the parent checks a reused worker is alive before a job
            proto.write('{"pong": true}\n')
            proto.flush()
            continue
        try:
            result = check(job["gold"], job["pred"])
        except Exception as exc:  # noqa: BLE001 - reported to the parent as a reason
            result = {"ok": False, "reason": f"verify_error: {type(exc).__name__}"}
        proto.write(json.dumps(result) + "\n")
        proto.flush()


if __name__ == "__main__":
    main()
