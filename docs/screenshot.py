"""Refresh docs/viewer.png, the README's picture of the viewer: python docs/screenshot.py

It trains the bundled example offline (the demo's simulated models), renders the HTML report and
photographs its summary and validation chart in headless Chromium (/usr/bin/chromium).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from skillopt_ci.demo import demo_config
from skillopt_ci.sim.server import ScriptedModelServer
from skillopt_ci.sim.sim_models import SimulatedModels
from skillopt_ci.train.entry import TrainRequest, run_training
from skillopt_ci.viewer.report import write_html_report

OUT = Path(__file__).resolve().parent / "viewer.png"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # the report shows the run's path relative to here: no machine path in the picture
        with ScriptedModelServer(SimulatedModels()) as server:
            config = demo_config(server.openai_base_url, Path(tmp))
            run_training(config, TrainRequest(skill="ticket-triage", out=Path("train-ticket-triage")),
                         log=lambda line: None, session_options={"show_progress": False})
        write_html_report(Path("train-ticket-triage"), Path("report.html"))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(Path("report.html").resolve().as_uri())
            page.wait_for_selector('#summary[data-ready="1"]')
            accepted = page.locator('#val-chart circle.point[data-decision="accepted"]').first
            accepted.click()
            page.evaluate("window.scrollTo(0, 0)")
            box = page.locator(".chart-box").bounding_box()
            page.screenshot(path=str(OUT), full_page=True,
                            clip={"x": 0, "y": 0, "width": 1400, "height": box["y"] + box["height"] + 16})
            browser.close()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
