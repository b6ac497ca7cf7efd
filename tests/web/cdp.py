"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON messages ended
by NUL on file descriptors 3 and 4), with no client library, so that tests can sign in, fill forms and click
through the real pages, run JavaScript in them and read the result, wait for what a page's script does, emulate
the dark colour scheme and save screenshots. Each Browser.tab() is a separate browser context (its own
cookies)."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, binary: str, width: int = 1400, height: int = 1000) -> None:
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # above 10, so that placing them at 3 and 4 in the child cannot overwrite one with the other
        child_in = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
        child_out = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
        os.close(to_chrome_r)
        os.close(from_chrome_w)

        def place_pipes() -> None:
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        self.size = (width, height)
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--remote-debugging-pipe",
             f"--window-size={width},{height}", "--no-first-run", "about:blank"],
            preexec_fn=place_pipes, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(child_in)
        os.close(child_out)
        self.write_fd, self.read_fd = to_chrome_w, from_chrome_r
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.call("Browser.close", timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.write_fd)
        os.close(self.read_fd)

    def _message(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                raise BrowserError("no answer from Chromium in time")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium closed its pipe (exit {self.proc.poll()})")
            self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(self, method: str, session: str | None = None, *, timeout: float = 60, **params: Any) -> dict[str, Any]:
        """Send a command (to a tab's `session`, else to the browser) and return its result; the events that
        arrive meanwhile are kept in `events`."""
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._message(timeout)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self.events.append(answer)

    def wait_event(self, method: str, session: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method and e.get("sessionId") == session:
                    del self.events[: i + 1]
                    return
            self.events.append(self._message(max(deadline - time.monotonic(), 0.01)))

    def tab(self) -> Tab:
        """A new tab in a browser context of its own (its own cookies)."""
        context = self.call("Target.createBrowserContext")["browserContextId"]
        width, height = self.size
        target = self.call("Target.createTarget", url="about:blank", browserContextId=context, width=width,
                           height=height)["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session)
        return Tab(self, session)


class Tab:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser, self.session = browser, session

    def _loaded(self, action: Callable[[], Any], timeout: float = 60) -> None:
        self.browser.events.clear()
        action()
        self.browser.wait_event("Page.loadEventFired", self.session, timeout)

    def go(self, url: str) -> None:
        """Load `url` and wait for its load event (its deferred scripts have run by then)."""
        self._loaded(lambda: self.browser.call("Page.navigate", self.session, url=url))

    def run(self, script: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        answer = self.browser.call("Runtime.evaluate", self.session, expression=script, returnByValue=True,
                                   awaitPromise=True)
        if "exceptionDetails" in answer:
            raise BrowserError(f"{script}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def submit(self, script: str) -> None:
        """Run a script that submits a form (or clicks a link), and wait for the next page."""
        self._loaded(lambda: self.run(script))

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.run(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"still false after {timeout} s: {expression}")
            time.sleep(0.2)

    @property
    def url(self) -> str:
        return str(self.run("location.href"))

    def text(self) -> str:
        """The page as a person reads it (innerText: what is shown, hidden elements left out)."""
        return " ".join(str(self.run("document.body.innerText")).split())

    def dark(self, on: bool) -> None:
        self.browser.call("Emulation.setEmulatedMedia", self.session,
                          features=[{"name": "prefers-color-scheme", "value": "dark" if on else "light"}])

    def screenshot(self, path: Path) -> None:
        data = self.browser.call("Page.captureScreenshot", self.session, format="png",
                                 captureBeyondViewport=False)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
