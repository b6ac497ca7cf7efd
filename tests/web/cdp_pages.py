"""Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages ended
by NUL on file descriptors 3 and 4), without a client library: load a page, run JavaScript in it and read the
result, wait for what a page's script does, emulate the dark colour scheme, save a screenshot."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import subprocess
import time
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
        target = self.call("Target.createTarget", url="about:blank", width=width, height=height)["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)

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

    def call(self, method: str, *, session: bool = False, timeout: float = 60, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._message(timeout)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self.events.append(answer)

    def open(self, url: str, timeout: float = 60) -> None:
        """Load `url` and wait for its load event (its deferred scripts have run by then)."""
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._message(max(deadline - time.monotonic(), 0.01)))

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise: its result)."""
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.js(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"still false after {timeout} s: {expression}")
            time.sleep(0.2)

    def text(self) -> str:
        """The page as a person reads it (innerText: what is shown, hidden elements left out)."""
        return " ".join(str(self.js("document.body.innerText")).split())

    def dark(self, on: bool) -> None:
        self.call("Emulation.setEmulatedMedia", session=True,
                  features=[{"name": "prefers-color-scheme", "value": "dark" if on else "light"}])

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=False)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
