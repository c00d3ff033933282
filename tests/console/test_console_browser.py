"""The real console (`tandem console`) in headless Chromium: sign in, render the overview, screenshot it.

Saves tests/artifacts/console_overview.png for a human to look at.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tandem.processes import free_ports
from tests.apps import running_console, wait_until
from tests.browser import headless_chromium
from tests.conftest import REPO

ARTIFACT = REPO / "tests" / "artifacts" / "console_overview.png"
pytestmark = pytest.mark.slow


class ConsoleUrl(str):
    def __new__(cls, url: str, home):
        value = super().__new__(cls, url)
        value.home = home
        return value


@pytest.fixture()
def console_server(tmp_path):
    """`tandem console` on a free port against its own database, filled by real requests through the service."""
    home = tmp_path / "home"
    app_port, port = free_ports(2)
    env = {**os.environ, "TANDEM_HOME": str(home), "TANDEM_CONSOLE_PASSWORD": "s3cret-console",
           "TANDEM_APP_PORT": str(app_port)}  # nothing listens there: the page must say so
    fill = "from tests.console.traffic import drive_in_this_home; drive_in_this_home()"
    subprocess.run([sys.executable, "-c", fill], cwd=REPO, env=env, check=True, timeout=300)
    with running_console(env, timeout=90, port=port) as url:
        yield ConsoleUrl(url, home)


@pytest.fixture()
def browser(tmp_path):
    with headless_chromium(tmp_path / "chromium") as chrome:
        yield chrome


def test_overview_in_a_real_browser(console_server, browser):
    browser.call("Emulation.setDeviceMetricsOverride", width=1440, height=1700, deviceScaleFactor=1, mobile=False)
    browser.open(console_server)
    wait_until(lambda: browser.js("!!document.querySelector('input[type=password]')"), 60, "the sign-in form")
    body = browser.js("document.body.innerText")
    assert "Overview" not in body and "Requests" not in body  # nothing before sign-in

    def sign_in(password: str) -> None:
        browser.js("document.querySelector('input[type=password]').focus()")
        browser.js("document.querySelector('input[type=password]').select()")
        browser.call("Input.insertText", text=password)
        browser.js("[...document.querySelectorAll('button')].find(b => b.innerText.includes('Sign in')).click()")

    sign_in("wrong")
    wait_until(lambda: "Wrong password" in browser.js("document.body.innerText"), 30, "the refusal")
    sign_in("s3cret-console")
    wait_until(lambda: "Traffic per route" in browser.js("document.body.innerText"), 60, "the overview")
    wait_until(lambda: browser.js("document.querySelectorAll('[data-testid=\"stVegaLiteChart\"] canvas, "
                                "[data-testid=\"stVegaLiteChart\"] svg').length") >= 4, 60, "four rendered charts")
    time.sleep(3)  # let vega finish drawing and the sidebar finish sliding in
    text = browser.js("document.body.innerText")
    import sqlite3

    with sqlite3.connect(console_server.home / "tandem.db") as conn:
        logged = conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
    assert logged > 20 and f"{logged:,}" in text and "not reachable" in text
    # operators get no developer toolbar: no "Deploy" button, no rerun/settings menu
    assert "Deploy" not in text and not browser.js("!!document.querySelector('[data-testid=\"stAppDeployButton\"]')")
    assert browser.screenshot(ARTIFACT).stat().st_size > 30_000
