"""The report page in headless Chromium (Debian's `chromium` package; nothing is downloaded).

The page is opened from the file system with the network shut off. One pass dumps the DOM after a probe script
(appended to a copy of the page) has opened a kernel, read its code, measured the plot and pressed the tree's
buttons; another takes a screenshot of the page as written. Both fail on any console message or page error.
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelsearch.cli import app
from tests.views.known_store import ALPHA_STATUS, build_known_store

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "out" / "report-screenshot.png"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                                "(apt-get install -y chromium)")

# First in <head>: collect every error and console message into the page itself.
HOOK = """<script>
window.__ks = [];
window.addEventListener("error", function (e) { window.__ks.push("error: " + e.message); });
window.addEventListener("unhandledrejection", function (e) { window.__ks.push("rejection: " + e.reason); });
["error", "warn", "log"].forEach(function (k) {
  var f = console[k];
  console[k] = function () { window.__ks.push(k + ": " + [].join.call(arguments, " ")); f.apply(console, arguments); };
});
</script>"""

# Last in <body>: exercise the page and write what it saw into the DOM.
PROBE = """<script>
window.addEventListener("load", function () {
  var r = {};
  r.kernels = document.querySelectorAll("#tree details.k").length;
  r.ideas = document.querySelectorAll("#tree details.idea").length;
  r.open_at_start = Array.from(document.querySelectorAll("#tree details.k[open]")).map(function (d) { return d.id; });
  var sum = document.querySelector("#k1 > summary").getBoundingClientRect();
  r.root_summary = [sum.width, sum.height];
  var res = document.querySelector("#k3 > details.res");
  res.open = true; window.ksOpen(res);
  var pre = res.querySelector("pre.code");
  r.k3_code = pre ? pre.textContent : null;
  r.k3_code_box = pre ? [pre.getBoundingClientRect().width, pre.getBoundingClientRect().height] : null;
  r.k3_keywords = res.querySelectorAll("pre.code span.k").length;
  r.k3_table = (res.querySelector("table.res") || {}).textContent || null;
  r.k3_error = (res.querySelector("pre.err") || {}).textContent || null;
  r.best_table = (document.querySelector("#best .resbox table.res") || {}).textContent || null;
  r.best_keywords = document.querySelectorAll("#best pre.code span.k").length;
  var plot = document.querySelector("#plot-by-evals"), line = plot.querySelector("path.best").getBBox();
  r.plot_box = [plot.getBoundingClientRect().width, plot.getBoundingClientRect().height];
  r.best_line = [line.width, line.height];
  r.wall_plot = document.querySelector("#plot-by-time path.best").getBBox().width;
  document.querySelector("button[data-act=close]").click();
  r.open_after_collapse = document.querySelectorAll("#tree details[open]:not(.res)").length;
  document.querySelector("button[data-act=open]").click();
  r.open_after_expand = document.querySelectorAll("#tree details.k[open]").length;
  document.querySelector("button[data-act=path]").click();
  r.open_on_path = Array.from(document.querySelectorAll("#tree details.k[open]")).map(function (d) { return d.id; });
  r.errors = window.__ks;
  var out = document.createElement("pre"); out.id = "ks-probe"; out.textContent = JSON.stringify(r);
  document.body.appendChild(out);
});
</script>"""

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--no-default-browser-check", "--enable-logging=stderr", "--v=0",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9"]


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=120)


def _console_lines(stderr: str) -> list[str]:
    """Chromium logs a page's console messages and uncaught errors as ':CONSOLE' lines."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("browser")
    db = build_known_store(tmp / "known.db")
    res = CliRunner().invoke(app, ["report", "alpha", "--db", str(db), "-o", str(tmp / "report.html")])
    assert res.exit_code == 0, res.output
    return tmp / "report.html"


def test_report_renders_in_chromium(report, tmp_path):
    page = report.read_text()
    probed = page.replace("<head>", "<head>" + HOOK, 1).replace("</body>", PROBE + "</body>", 1)
    target = tmp_path / "probed.html"
    target.write_text(probed)
    run = _chromium(tmp_path, "--virtual-time-budget=5000", "--window-size=1280,1600", "--dump-dom",
                    target.as_uri())
    assert run.returncode == 0, run.stderr[-3000:]
    m = re.search(r'<pre id="ks-probe">(.*?)</pre>', run.stdout, re.S)
    assert m, f"the probe did not run; stderr:\n{run.stderr[-3000:]}"
    r = json.loads(html.unescape(m.group(1)))
    assert r["errors"] == [] and _console_lines(run.stderr) == []
    # the tree: every kernel and idea, the best path open, collapsible
    assert r["kernels"] == len(ALPHA_STATUS) and r["ideas"] == 5
    assert r["open_at_start"] == ["k1", "k2", "k6"]
    assert r["root_summary"][0] > 200 and r["root_summary"][1] > 10
    assert r["open_after_collapse"] == 0 and r["open_after_expand"] == len(ALPHA_STATUS)
    assert r["open_on_path"] == ["k1", "k2", "k6"]
    # a code block: k3's code, highlighted, laid out, with its results and error text
    assert "mask=offs <= n_cols" in r["k3_code"] and "class ModelNew(torch.nn.Module):" in r["k3_code"]
    assert r["k3_keywords"] >= 5 and r["k3_code_box"][0] > 300 and r["k3_code_box"][1] > 200
    assert "incorrect (correctness) — max abs err 3.1e-02" in r["k3_table"]
    assert "cpu-interpreter (not comparable with GPU timings)" in r["k3_table"]
    assert r["k3_error"].startswith("mismatch at [7, 1000]")
    assert "2.50× over eager · 2.00× over torch.compile" in r["best_table"] and r["best_keywords"] >= 5
    # the plots: laid out, with a best-so-far line spanning the axis and climbing
    assert r["plot_box"][0] > 400 and r["plot_box"][1] > 200
    assert r["best_line"][0] > 300 and r["best_line"][1] > 50 and r["wall_plot"] > 300


def test_report_screenshot_without_console_errors(report, tmp_path):
    shot = tmp_path / "report.png"
    run = _chromium(tmp_path, "--virtual-time-budget=3000", "--window-size=1280,2000", "--hide-scrollbars",
                    f"--screenshot={shot}", report.as_uri())
    assert run.returncode == 0, run.stderr[-3000:]
    assert _console_lines(run.stderr) == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000     # a rendered page, not a blank one
    SCREENSHOT.parent.mkdir(exist_ok=True)
    shutil.copy(shot, SCREENSHOT)                                        # kept for people to look at (out/ is ignored)
