"""A real ``streamlit run`` on loopback and Debian's Chromium driven by Playwright (tests and bench).

Chromium may only talk to 127.0.0.1: every host name but that resolves to nothing, and every request
to another address goes to a proxy on 127.0.0.1's discard port, where nothing listens, so it fails
there. That is enforced in the browser itself, not by Playwright's request interception, which would
disable the HTTP cache and slow every request (a returning visitor would not be measured as one).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.commands.ui import ROOT, streamlit_command
from core.settings import Settings

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>;127.0.0.1",
]  # fmt: skip
SCREENSHOTS = ROOT / "artifacts" / "screenshots"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def streamlit_server(db_url: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start the dashboard as ``python -m app ui`` would; yield its base URL; stop it."""
    port = free_port()
    child_env = {**os.environ, "SWEETSPOT_DB_URL": db_url, "PYTHONPATH": str(ROOT), **(env or {})}
    child_env.pop("SWEETSPOT_CONFIG", None)
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"streamlit-{port}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        streamlit_command(Settings(), port, "127.0.0.1"), cwd=ROOT, env=child_env, stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def wait_healthy(base: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode} (see $TMPDIR/streamlit-*.log)")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=1) as response:
                if response.status == 200:
                    return
        time.sleep(0.2)
    raise RuntimeError(f"streamlit did not answer on {base} within {timeout:.0f} s")


def launch(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def launch_profile(playwright: Any, folder: str) -> Any:
    """Chromium with a browser profile on disk (``folder``): the HTTP cache and V8's code cache persist
    between visits, as in the browser an ops person keeps using. Pages come from :func:`new_tab`."""
    return playwright.chromium.launch_persistent_context(folder, executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def new_page(browser: Any) -> Any:
    """A page in a new browser profile: a first visit, with an empty HTTP cache."""
    return browser.new_page(viewport={"width": 1440, "height": 1000})


def new_tab(profile: Any) -> Any:
    """A tab in ``profile`` (:func:`launch_profile`): tabs of one profile share its caches."""
    tab = profile.new_page()
    tab.set_viewport_size({"width": 1440, "height": 1000})
    return tab


RENDERED_JS = """(charts) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const drawn = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
    .filter(c => c.querySelector('canvas, svg.marks') && c.getBoundingClientRect().height > 50);
  return drawn.length >= charts;
}"""


def wait_rendered(page: Any, charts: int, timeout_ms: float = 45000) -> None:
    """Until the script finished running and ``charts`` Vega charts are drawn with a size."""
    page.wait_for_function(RENDERED_JS, arg=charts, timeout=timeout_ms, polling=50)


def screenshot(page: Any, path: Path) -> None:
    """The whole page: Streamlit scrolls inside its main block, so grow the viewport to fit it first."""
    height = page.evaluate(
        "() => Math.max(document.body.scrollHeight,"
        " document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight || 0)"
    )
    page.set_viewport_size({"width": 1440, "height": min(int(height) + 40, 6000)})
    page.wait_for_timeout(400)  # let Vega re-lay out after the resize
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
