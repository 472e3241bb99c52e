"""The HTML report of a big training run: file size and time to the rendered summary in headless
Chromium (Debian's /usr/bin/chromium, driven by Playwright).

Run: python bench/bench_report.py [--results 5000]

It trains the bundled example for real (scripted models, offline), then grows the run directory
to the requested number of task results by adding steps shaped like the real ones (every step's
rollout and validation results, with outputs of realistic and some very long lengths), renders
`skillopt-ci report`, and opens it 5 times. Targets: under 5 MB, summary rendered under 2 s.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from skillopt_ci.demo import demo_config
from skillopt_ci.sim.server import ScriptedModelServer
from skillopt_ci.sim.sim_models import SimulatedModels
from skillopt_ci.train.entry import TrainRequest, run_training
from skillopt_ci.viewer.report import write_html_report

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


def real_run(root: Path) -> Path:
    with ScriptedModelServer(SimulatedModels()) as server:
        config = demo_config(server.openai_base_url, root)
        run_training(config, TrainRequest(skill="ticket-triage", out=root / "run"), log=lambda line: None,
                     session_options={"show_progress": False})
    return root / "run"


def count_results(run: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in run.rglob("results.jsonl"))


WORDS = ("ticket", "billing", "refund", "priority", "customer", "account", "error", "crash", "invoice",
         "outage", "security", "password", "plan", "enterprise", "question", "because", "the", "is", "not")


def prose(rng: random.Random, size: int) -> str:
    """Text about as compressible as a model's answers (words, numbers, ids), ``size`` characters."""
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS) if rng.random() < 0.7 else f"{rng.choice(WORDS)}-{rng.randint(0, 99_999)}"
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def grow(run: Path, target: int, rng: random.Random) -> None:
    """Add steps cloned from the real ones until the run holds ``target`` task results."""
    state = json.loads((run / "state.json").read_text())
    templates = [r for r in state["history"] if r["kind"] == "step"]
    n = 0
    while count_results(run) < target:
        source = templates[n % len(templates)]
        step = f"e9-s{n:03d}"
        record = copy.deepcopy(source)
        record["step"] = step
        shutil.copytree(run / "steps" / source["step"], run / "steps" / step)
        for results in (run / "steps" / step).rglob("results.jsonl"):
            lines = []
            for k, line in enumerate(results.read_text().splitlines()):
                r = json.loads(line)
                r["task_id"] = f"{r['task_id']}-{n}-{k}"
                size = 60_000 if rng.random() < 0.01 else rng.randint(20, 600)
                r["output"] = (r["output"] or "") + " " + prose(rng, size)
                lines.append(json.dumps(r))
            results.write_text("\n".join(lines) + "\n")
        state["history"].append(record)
        n += 1
    (run / "state.json").write_text(json.dumps(state))
    (run / "summary.json").unlink()  # a big run in progress: the viewer shows it from the state


def time_to_summary(html: Path, runs: int = 5) -> list[float]:
    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for _ in range(runs):
            page = browser.new_page()
            started = time.perf_counter()
            page.goto(html.as_uri())
            page.wait_for_selector('#summary[data-ready="1"]', timeout=30_000)
            wall = time.perf_counter() - started
            in_page = page.evaluate("performance.now()") / 1000
            times.append(min(wall, in_page) if in_page > 0 else wall)
            page.close()
        browser.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", type=int, default=5000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = real_run(Path(tmp))
        grow(run, args.results, random.Random(0))
        html = Path(tmp) / "report.html"
        started = time.perf_counter()
        size = write_html_report(run, html)
        build = time.perf_counter() - started
        times = time_to_summary(html)
        state = json.loads((run / "state.json").read_text())
        print(f"training run: {len(state['history'])} steps, {count_results(run)} task results")
        print(f"  report.html {size / 2**20:.2f} MB (target < 5 MB), built in {build:.2f}s")
        print(f"  time to rendered summary in headless Chromium: median {statistics.median(times):.2f}s, "
              f"max {max(times):.2f}s over {len(times)} loads (target < 2 s)")


if __name__ == "__main__":
    main()
