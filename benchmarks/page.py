"""The explorable page: how long `tracer page` takes to write it, how big it is, and how long Chromium takes to open it.

    python benchmarks/page.py [--repeat N] [--budget MB] [--chapter SPEC] [--big SPEC]

For the chapter's spec (specs/ch17-prenorm.yaml) and the GPT-2-sized block (specs/gpt2-block.yaml), each a fresh
process, alternating, N times (default 3):

- `tracer page SPEC -o FILE --page-budget MB` against its peer `tracer run SPEC` (the same trace, printed as the
  table), the medians and their ratio;
- the page opened from file:// in headless Chromium (Playwright with Debian's /usr/bin/chromium, a fresh context
  each time), timed from the navigation until `window.tracerPage.ready`, against its peer: a file of the same size
  (the same bytes of data, a script that only says it is ready), the medians and their ratio.

It prints the sizes, the budget and the load average (the machine is shared: only ratios measured in the same run
mean much).  The targets: the chapter's page well under 1 MB; the big page within the budget, ready in under 2 s;
exit 1 if one is missed.  Without playwright or Chromium the opening is left out (and said so).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("TRACER_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
READY = "() => window.tracerPage !== undefined && window.tracerPage.ready === true"
OPEN_TARGET_S = 2.0  # the GPT-2-sized page opens in under 2 s
CHAPTER_TARGET_BYTES = 1_000_000  # the chapter's page: well under 1 MB
_SCRIPT = Path(sys.executable).with_name("tracer")
TRACER = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "tracer"]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "NO_COLOR", "FORCE_COLOR")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")  # this checkout's tracer
    env["LANG"] = "C.UTF-8"
    return env


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-500:]}")
    return elapsed


def peer_file(page: Path, folder: Path) -> Path:
    """A file as big as the page whose script does nothing but say it is ready: what loading that many bytes costs."""
    size = page.stat().st_size
    head = "<!doctype html><html><head><meta charset='utf-8'><script id='tracer-data' type='application/json'>\""
    tail = "\"</script><script>window.tracerPage = {ready: true};</script></head><body><p>peer</p></body></html>"
    filler = "A" * max(0, size - len(head) - len(tail))
    out = folder / f"peer-{page.name}"
    out.write_text(head + filler + tail, encoding="utf-8")
    return out


def open_seconds(browser: Any, path: Path) -> float:
    """From the navigation to window.tracerPage.ready, in a fresh context, every request but the file refused."""
    context = browser.new_context(viewport={"width": 1200, "height": 800}, service_workers="block")
    url = path.resolve().as_uri()
    context.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_function(READY, timeout=120_000)
    elapsed = time.perf_counter() - start
    context.close()
    return elapsed


def megabytes(n: int) -> str:
    return f"{n / 1e6:.3f} MB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command and each opening (default 3)")
    ap.add_argument("--budget", type=float, default=20.0, help="--page-budget in MB (default 20, tracer's default)")
    ap.add_argument("--chapter", default="specs/ch17-prenorm.yaml", help="the small spec (default: the chapter's)")
    ap.add_argument("--big", default="specs/gpt2-block.yaml", help="the big spec (default: the GPT-2-sized block)")
    args = ap.parse_args(argv)
    env = environment()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"page benchmark: budget {args.budget:g} MB, {args.repeat} runs each, load average {load} ({os.cpu_count()} cores)")
    missed: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pages: dict[str, Path] = {}
        for spec in (args.chapter, args.big):
            page = folder / (Path(spec).stem + ".html")
            build = [*TRACER, "page", spec, "-o", str(page), "--force", "--page-budget", f"{args.budget:g}"]
            run = [*TRACER, "run", spec]
            builds, runs = [], []
            for _ in range(args.repeat):
                builds.append(timed(build, env))
                runs.append(timed(run, env))
            size = page.stat().st_size
            b, r = statistics.median(builds), statistics.median(runs)
            print(f"{spec}: page {megabytes(size)}; tracer page {b:.3f} s, tracer run {r:.3f} s, ratio {b / r:.2f}")
            if spec == args.chapter and size >= CHAPTER_TARGET_BYTES:
                missed.append(f"{spec}: the page is {megabytes(size)}, not under 1 MB")
            if size > args.budget * 1e6:
                missed.append(f"{spec}: the page is {megabytes(size)}, over the budget of {args.budget:g} MB")
            pages[spec] = page
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            print("opening: left out (playwright is not installed: pip install -e '.[browser]')")
            return report(missed)
        if not Path(CHROMIUM).is_file():
            print(f"opening: left out (no Chromium at {CHROMIUM}: apt-get install chromium)")
            return report(missed)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            for spec, page in pages.items():
                same_size = peer_file(page, folder)
                opens, peers = [], []
                open_seconds(browser, same_size)  # one warm-up: the browser's first page pays for its own start
                for _ in range(args.repeat):
                    opens.append(open_seconds(browser, page))
                    peers.append(open_seconds(browser, same_size))
                o, q = statistics.median(opens), statistics.median(peers)
                print(f"{spec}: ready in Chromium {o:.3f} s, a same-size file {q:.3f} s, ratio {o / q:.2f}")
                if spec == args.big and o >= OPEN_TARGET_S:
                    missed.append(f"{spec}: ready in {o:.2f} s, not under {OPEN_TARGET_S:g} s")
            browser.close()
    return report(missed)


def report(missed: list[str]) -> int:
    for line in missed:
        print(f"missed: {line}")
    print("targets: met" if not missed else f"targets: {len(missed)} missed")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
