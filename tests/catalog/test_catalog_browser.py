"""The catalog in a real headless Chromium: in the chat page a search shows its filter chips and product cards, a fact
its source, a comparison a table, and a barcode photo (uploaded through the message box's file input) finds its
product; then the console's Catalog page shows the search log and the null-search report with the search that found
nothing. Real parts: `tandem catalog ingest` of the demo catalog, `tandem serve` (no LLM server: catalog answers need
none) and `tandem console` on that data directory, MiniLM, Chroma, zxing-cpp, RapidOCR. Saves tests/artifacts/
catalog_search.png, catalog_compare.png, catalog_barcode.png and console_catalog.png."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from catalog.images import render_barcode
from tests.apps import running_console, serving, wait_until
from tests.browser import Browser, headless_chromium
from tests.conftest import REPO, VENV_BIN
from tests.ui.conftest import ARTIFACTS

pytestmark = pytest.mark.slow

DEMO_FEED = REPO / "catalog" / "demo" / "catalog.tsv"
KETTLE_GTIN = "2000000000015"  # Electric Kettle 1.7 L - Silver, the demo catalog's first product
PASSWORD = "s3cret-catalog"
BADGES = "document.querySelectorAll('#chat .route-badge').length"
LAST_BOT = ("(() => { const bots = document.querySelectorAll('#chat .bot'); "
            "return bots.length ? bots[bots.length - 1] : null; })()")


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    """The demo catalog ingested into a data directory of its own, then the chat app and the console on it."""
    home = tmp_path_factory.mktemp("catalog-browser") / "home"
    env = {**os.environ, "TANDEM_HOME": str(home), "TANDEM_DATABASE_URL": "", "TANDEM_CHROMA_URL": ""}
    done = subprocess.run([str(VENV_BIN / "tandem"), "catalog", "ingest", str(DEMO_FEED), "--no-images"], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    with running_console({**env, "TANDEM_CONSOLE_PASSWORD": PASSWORD}, timeout=180) as console_url, \
            serving(home) as app:
        yield app, console_url, home


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with headless_chromium(tmp_path_factory.mktemp("chromium-profile")) as chrome:
        yield chrome


def _send(browser: Browser, text: str, replies_before: int) -> dict:
    """Type and send ``text``; wait for its reply's route badge; the reply's text and HTML."""
    browser.js("document.querySelector('#message textarea').focus()")
    if text:
        browser.type_text(text)
    browser.press_enter()
    browser.wait_for(f"{BADGES} > {replies_before}", timeout=120, what=f"the reply to {text or 'the photo'!r}")
    return browser.js(f"(() => {{ const bot = {LAST_BOT}; return {{text: bot.innerText, html: bot.innerHTML, "
                      "items: Array.from(bot.querySelectorAll('li')).map(li => li.innerText), "
                      "links: bot.querySelectorAll('li a').length, tables: bot.querySelectorAll('table').length, "
                      "header: Array.from(bot.querySelectorAll('table th')).map(th => th.innerText)}; })()")


def test_search_fact_comparison_and_barcode_photo_in_the_chat_then_the_console_catalog_page(shop, browser, tmp_path):
    app, console_url, _ = shop
    browser.open(app.url + "/")
    browser.wait_for("!!document.querySelector('#message textarea')", timeout=90, what="the message box")

    # A search: the filter chips line, then the cards (linked title, price, availability), only blue throws <= $50
    search = _send(browser, "a blue throw blanket under $50", 0)
    assert "Filters: blue · throw blanket · under $50" in search["text"], search["text"]
    assert search["items"] and search["links"] == len(search["items"])
    assert all("$" in item and ("Throw" in item or "Blanket" in item) for item in search["items"]), search["items"]
    assert "route: catalog" in search["text"]
    browser.screenshot(ARTIFACTS / "catalog_search.png")

    # A fact: the value from the record, with its source (product and field) in the answer and the badge
    fact = _send(browser, "how many litres is the family kettle?", 1)
    assert "Family Electric Kettle 2.2 L - " in fact["text"] and ": capacity is 2.2 L." in fact["text"], fact["text"]
    assert "source: product NW-FAMILY-KETTLE-22-" in fact["text"] and "field capacity" in fact["text"]
    assert "sources: Family Electric Kettle 2.2 L" in fact["text"]

    # A comparison: a table, one column per product
    compare = _send(browser, "compare the two cheapest desk lamps", 2)
    assert compare["tables"] == 1 and len(compare["header"]) == 3, compare["header"]
    assert "price" in compare["text"] and "availability" in compare["text"]
    browser.screenshot(ARTIFACTS / "catalog_compare.png")

    # Nothing of the kind: not a catalog answer, and logged as a null search
    _send(browser, "do you sell bicycles?", 3)

    # A barcode photo, chosen in the message box's file input, finds its product by its GTIN
    photo = render_barcode(KETTLE_GTIN, tmp_path / "kettle-barcode.png")
    browser.attach("#message input[type=file]", photo)
    browser.wait_for("!!document.querySelector('#message button.delete-button')", timeout=30,
                     what="the attached photo in the message box")
    found = _send(browser, "", 4)
    assert f"(found by its barcode {KETTLE_GTIN})" in found["text"] and "Electric Kettle 1.7 L" in found["text"]
    assert found["links"] == 1  # its card
    browser.screenshot(ARTIFACTS / "catalog_barcode.png")

    # The console's Catalog page: the search log (the chat's searches) and the null-search report (bicycles)
    browser.call("Emulation.setDeviceMetricsOverride", width=1440, height=2400, deviceScaleFactor=1, mobile=False)
    browser.open(console_url)
    wait_until(lambda: browser.js("!!document.querySelector('input[type=password]')"), 90, "the sign-in form")
    browser.js("document.querySelector('input[type=password]').focus()")
    browser.type_text(PASSWORD)
    browser.js("[...document.querySelectorAll('button')].find(b => b.innerText.includes('Sign in')).click()")
    link = ("[...document.querySelectorAll('a')].find(a => (a.getAttribute('href') || '').endsWith('/catalog') "
            "|| a.innerText.trim().endsWith('Catalog'))")
    wait_until(lambda: browser.js(f"!!{link}"), 90, "the navigation after sign-in")
    browser.js(f"{link}.click()")
    wait_until(lambda: "Searches that found nothing" in browser.js("document.body.innerText"), 90, "the Catalog page")
    cells = ("Array.from(document.querySelectorAll('[data-testid=\"stDataFrame\"] td, "
             "[data-testid=\"stDataFrame\"] [role=gridcell]')).map(c => c.textContent)")
    wait_until(lambda: "do you sell bicycles?" in browser.js(cells), 60, "the null search in the report's grid")
    shown = browser.js(cells)
    assert "a blue throw blanket under $50" in shown  # the search log
    text = browser.js("document.body.innerText")
    # the five chat messages above: search, fact, comparison, the null search and the photo
    assert "5 catalog searches in" in text and "Every product message in this time range found something" not in text
    time.sleep(2)  # let the grids finish drawing
    assert browser.screenshot(ARTIFACTS / "console_catalog.png").stat().st_size > 30_000
