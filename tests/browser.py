"""A minimal headless-Chromium driver over the DevTools protocol (websocket-client); no browser download.

Only what the UI test needs: open a page, run JavaScript, type, press Enter, take a screenshot.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import websocket

from tests.apps import wait_until

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-extensions",
                  "--disable-dev-shm-usage", "--window-size=1280,1100", "--hide-scrollbars"]


def chromium_path() -> str | None:
    return next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             shutil.which("google-chrome")) if p), None)


class Browser:
    def __init__(self, executable: str, profile: Path, port: int):
        self.process = subprocess.Popen([executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                         f"--remote-debugging-port={port}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._ids = itertools.count(1)
        deadline = time.monotonic() + 30
        while True:
            try:
                pages = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=2).json()
                page = next(p for p in pages if p.get("type") == "page")
                break
            except (httpx.HTTPError, ValueError, StopIteration):
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.close()
                    raise RuntimeError("headless Chromium did not start") from None
                time.sleep(0.3)
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)

    def call(self, method: str, **params):
        message_id = next(self._ids)
        self.ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60, what: str = ""):
        return wait_until(lambda: self.js(expression), timeout, what or expression, interval=0.25)

    def open(self, url: str) -> None:
        self.call("Page.enable")
        self.call("Page.navigate", url=url)

    def type_text(self, text: str) -> None:
        self.call("Input.insertText", text=text)

    def press_enter(self) -> None:
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter", windowsVirtualKeyCode=13,
                      **({"text": "\r"} if kind == "keyDown" else {}))

    def attach(self, selector: str, *files: Path) -> None:
        """Put files into a file <input>, as choosing them in the file dialog does."""
        root = self.call("DOM.getDocument", depth=-1, pierce=True)["root"]["nodeId"]
        node = self.call("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
        if not node:
            raise AssertionError(f"no element matches {selector}")
        self.call("DOM.setFileInputFiles", nodeId=node, files=[str(f) for f in files])

    def click(self, selector: str) -> None:
        found = self.js(f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
                        " if (!el) return false; el.click(); return true; })()")
        if not found:
            raise AssertionError(f"nothing to click at {selector}")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def headless_chromium(profile: Path) -> Iterator[Browser]:
    """Debian's Chromium, headless on a free port with its own profile folder; closed on exit."""
    from tandem.processes import free_port

    executable = chromium_path()
    assert executable is not None, "Chromium is not installed: run `make test` (it installs Debian's chromium)"
    chrome = Browser(executable, profile, free_port())
    try:
        yield chrome
    finally:
        chrome.close()
