"""A small driver of headless Chromium over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON
messages ending in NUL on file descriptors 3 and 4), so that tests can sign in, fill forms and click through the
real pages with no extra package. Each Browser.tab() is a separate browser context (its own cookies)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any


class Browser:
    def __init__(self, binary: str) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def pipes() -> None:  # in the child: its fd 3 reads our messages, its fd 4 writes the answers
            reading, writing = os.dup(to_child_r), os.dup(from_child_w)  # above 4: neither dup2 undoes the other
            os.dup2(reading, 3)
            os.dup2(writing, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--remote-debugging-pipe",
             "--no-first-run", "--window-size=1400,1000", "about:blank"],
            preexec_fn=pipes, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._next = 0
        self._buffer = b""
        self.events: list[dict[str, Any]] = []

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        os.close(self._to_child)
        os.close(self._from_child)

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params, **({"sessionId": session} if session else {})}
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self.events.append(answer)

    def wait_for(self, method: str, session: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method and e.get("sessionId") == session:
                    del self.events[: i + 1]
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {timeout} s")
            self.events.append(self._read())

    def tab(self) -> Tab:
        context = self.send("Target.createBrowserContext")["browserContextId"]
        target = self.send("Target.createTarget", url="about:blank", browserContextId=context)["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.send("Page.enable", session)
        return Tab(self, session)


class Tab:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser, self.session = browser, session

    def _loaded(self, action: Any) -> None:
        self.browser.events.clear()
        action()
        self.browser.wait_for("Page.loadEventFired", self.session)

    def go(self, url: str) -> None:
        self._loaded(lambda: self.browser.send("Page.navigate", self.session, url=url))

    def run(self, script: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        answer = self.browser.send("Runtime.evaluate", self.session, expression=script, returnByValue=True,
                                   awaitPromise=True)
        if "exceptionDetails" in answer:
            raise RuntimeError(f"{script}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def submit(self, script: str) -> None:
        """Run a script that submits a form (or clicks a link), and wait for the next page."""
        self._loaded(lambda: self.run(script))

    @property
    def url(self) -> str:
        return str(self.run("location.href"))

    def text(self) -> str:
        return " ".join(str(self.run("document.body.innerText")).split())

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.browser.send("Page.captureScreenshot", self.session, format="png")["data"]
        path.write_bytes(base64.b64decode(data))
