"""The run report: Mermaid -> SVG, the files written, and the page in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from metaagentx.cli import main
from metaagentx.report import build_report, load_run
from metaagentx.report_svg import mermaid_to_svg, parse_mermaid

RUN = Path(__file__).parent / "fixtures" / "run_small"
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


def test_parse_mermaid_subset() -> None:
    g = parse_mermaid(
        "flowchart LR\n"
        '  q(["QUESTION"]) --> a["solver #quot;A#quot;"] -->|code| t[run_python]\n'
        "  a & b{vote} -.-> j((judge)); j -- final --> ans([answer])\n"
        "  %% a comment\n  classDef x fill:#fff\n  subgraph S\n  b\n  end\n"
    )
    assert g.direction == "LR"
    assert g.nodes == {
        "q": ("QUESTION", "stadium"),
        "a": ('solver "A"', "rect"),
        "t": ("run_python", "rect"),
        "b": ("vote", "rhombus"),
        "j": ("judge", "circle"),
        "ans": ("answer", "stadium"),
    }
    assert g.edges == [
        ("q", "a", "", False),
        ("a", "t", "code", False),
        ("a", "j", "", True),
        ("b", "j", "", True),
        ("j", "ans", "final", False),
    ]
    with pytest.raises(ValueError, match="line 2"):
        parse_mermaid("graph TD\n  a --> ???")
    with pytest.raises(ValueError, match="first line"):
        parse_mermaid("sequenceDiagram\n  a->>b: hi")


def test_svg_layers_follow_the_flow() -> None:
    svg = mermaid_to_svg("graph TD\n q --> s\n s --> c\n c --> s\n s --> s\n s --> ans")
    ys = {
        m.group(1): float(m.group(2))
        for m in re.finditer(r'data-id="(\w+)"><rect class="node" x="[\d.]+" y="([\d.]+)"', svg)
    }
    assert ys["q"] < ys["s"] < ys["c"]  # the back edge c -> s does not lift c above s
    assert ys["c"] == ys["ans"]
    assert svg.count('class="edge"') == 5 and svg.count('<g class="n"') == 4


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_report(RUN, out=tmp_path_factory.mktemp("report"))


def test_report_files(report_dir: Path) -> None:
    figs = sorted(p.name for p in (report_dir / "figures").glob("*.png"))
    assert figs == [
        "attribution.png",
        "cost_accuracy.png",
        "curves.png",
        "structure_mix.png",
        "structures_training.png",
    ]
    page = (report_dir / "report.html").read_text()
    assert page.count('<img class="fig"') == 5 and page.count("data:image/png;base64,") == 5
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched online
    assert page.count('<details class="system"') == 10  # 6 evaluated + 4 training executions
    assert "not drawn" not in page
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="mermaid-svg"') == 20
    summary = (report_dir / "summary.md").read_text()
    assert "metrics.jsonl:9: skipped a truncated last line" in summary
    assert "| step_000008 | 100.00 | – | 100.00 | 50.00 | 0.00 | – | 62.50* |" in summary
    assert "| design | 2 | newly solved with a different structure |" in summary
    assert "share of the gain from design: 66.7%" in summary
    # training samples: 4 executions, agents 2+2+1+0, 1 timeout without calls, calls 2,3,1,0
    assert "| training samples (step 6) | 4 | 1.25 | 2 | 100.0% | 1.50 |" in summary
    assert (
        "(quoted from the paper)" in summary and "![Training curves](figures/curves.png)" in summary
    )


def test_cli_compare(tmp_path: Path) -> None:
    baseline = RUN / "eval" / "step_000000" / "items.jsonl"
    assert main(["report", str(RUN), "--compare", str(baseline), "--out", str(tmp_path)]) == 0
    summary = (tmp_path / "summary.md").read_text()
    assert "From `baseline:step_000000` to `step_000008`" in summary
    with pytest.raises(FileNotFoundError, match="no items.jsonl"):
        build_report(RUN, compare=tmp_path / "nothing-here", out=tmp_path)


def test_compare_with_a_run_folder() -> None:
    data = load_run(RUN, compare=RUN)
    assert list(data.evals) == [
        "run_small:step_000000",
        "run_small:step_000008",
        "step_000000",
        "step_000008",
    ]
    assert data.pair == ("run_small:step_000008", "step_000008")
    assert [m["step"] for m in data.compare_metrics] == list(range(8))  # its curve is overlaid


def test_pair_names_the_labels(tmp_path: Path) -> None:
    data = load_run(RUN, pair=("step_000008", "step_000000"))  # reversed on purpose
    assert data.pair == ("step_000008", "step_000000")
    with pytest.raises(ValueError, match="no evaluation labelled 'step_9'.*step_000000"):
        load_run(RUN, pair=("step_9", "step_000000"))
    assert (
        main(["report", str(RUN), "--pair", "step_000008,step_000000", "--out", str(tmp_path)]) == 0
    )
    assert "| newly_failed | 3 |" in (tmp_path / "summary.md").read_text()  # 3 gains reversed


def test_report_of_an_empty_run_says_what_is_missing(tmp_path: Path) -> None:
    out = build_report(tmp_path, out=tmp_path / "r")
    page = (out / "report.html").read_text()
    assert "metrics.jsonl: none found" in page and "No evaluated or sampled systems" in page


def _chromium(tmp: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        BROWSER,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        *extra,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _console_lines(stderr: str) -> list[str]:
    """Console messages and uncaught exceptions from Chromium's log (our page logs nothing)."""
    return [ln for ln in stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]


@pytest.mark.browser
@pytest.mark.skipif(
    BROWSER is None,
    reason="headless Chromium not found; enable this test "
    "with `apt-get install chromium` (CI's .ci/run does this)",
)
def test_report_renders_in_headless_chromium(report_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>notDefined();</script></body></html>")
    assert _console_lines(_chromium(tmp_path, bad.as_uri(), "--dump-dom").stderr)  # detector works

    url = (report_dir / "report.html").as_uri()
    dom = _chromium(tmp_path, url, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert _console_lines(dom.stderr) == []
    ready = re.search(r'<body data-ready="(\d+)"', dom.stdout)
    assert ready and int(ready.group(1)) >= 1  # the script ran to its end and saw the graphs
    assert dom.stdout.count('<img class="fig"') == 5

    shot = tmp_path / "report.png"
    res = _chromium(tmp_path, url, f"--screenshot={shot}", "--window-size=1200,5200")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    assert _console_lines(res.stderr) == []
    from PIL import Image

    with Image.open(shot) as im:
        assert im.size == (1200, 5200)
        colours = {c for _, c in im.convert("RGB").getcolors(maxcolors=1 << 22)}
    # the figures and graphs paint many distinct colours; a blank or error page does not
    assert len(colours) > 200
    # the executor-phase shading of the training curves (#cfe3f7 at alpha 0.8 on white)
    shade = (217, 233, 249)
    assert any(all(abs(a - b) <= 4 for a, b in zip(c, shade)) for c in colours)
    shutil.copy(shot, report_dir / "screenshot.png")
    print(f"screenshot: {report_dir / 'screenshot.png'}")


def test_demo_layout_reads_training_from_rl(tmp_path: Path) -> None:
    """`metaagentx demo` writes RUN/eval and RUN/rl/{metrics.jsonl,samples}: both are found."""
    shutil.copytree(RUN / "eval", tmp_path / "eval")
    (tmp_path / "rl").mkdir()
    shutil.copy(RUN / "metrics.jsonl", tmp_path / "rl" / "metrics.jsonl")
    shutil.copytree(RUN / "samples", tmp_path / "rl" / "samples")
    data = load_run(tmp_path)
    assert [m["step"] for m in data.metrics] == [m["step"] for m in load_run(RUN).metrics]
    assert data.train_items and set(data.evals) == set(load_run(RUN).evals)
