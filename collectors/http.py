"""HTTP fetching shared by every collector: one place that turns transport failures into ScrapeError."""

from __future__ import annotations

import httpx

from app.errors import ScrapeError

# Ask for the classic text format: some servers answer OpenMetrics when the client allows it.
ACCEPT_TEXT = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"
MAX_BODY_BYTES = 32 * 1024 * 1024


def fetch_text(url: str, timeout_s: float, client: httpx.Client | None = None, hint: str = "") -> str:
    """GET ``url`` and return its body as text; any failure raises ScrapeError naming the URL."""
    try:
        if client is None:
            with httpx.Client(timeout=timeout_s) as own:
                response = own.get(url, headers={"Accept": ACCEPT_TEXT})
        else:
            response = client.get(url, headers={"Accept": ACCEPT_TEXT}, timeout=timeout_s)
    except httpx.TimeoutException:
        raise ScrapeError(f"cannot reach {url} (no answer within {timeout_s:g} s)", hint) from None
    except httpx.HTTPError as exc:
        reason = _reason(exc)
        raise ScrapeError(f"cannot reach {url} ({reason})", hint) from None
    if response.status_code != 200:
        raise ScrapeError(f"{url} answered HTTP {response.status_code}", hint)
    if len(response.content) > MAX_BODY_BYTES:
        raise ScrapeError(f"{url} sent {len(response.content)} bytes, more than the {MAX_BODY_BYTES} allowed")
    return response.text


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc) or type(exc).__name__
    if "refused" in text.lower():
        return "connection refused"
    return text.splitlines()[0][:200]
