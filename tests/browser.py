"""A real ``streamlit run`` on loopback and Debian's Chromium driven by Playwright (tests and bench).

Chromium may only talk to 127.0.0.1: every host name but that resolves to nothing, and every request
to another address goes to a proxy on 127.0.0.1's discard port, where nothing listens, so it fails
there. That is enforced in the browser itself, not by Playwright's request interception, which would
disable the HTTP cache and slow every request (a returning visitor would not be measured as one).
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import subprocess
import time
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.commands.ui import ROOT, proxy_environment, streamlit_command
from core.settings import Settings
from tests.support.ports import free_port
from tests.support.waiting import STEP_BOUND_S

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>;127.0.0.1",
]  # fmt: skip
SCREENSHOTS = ROOT / "artifacts" / "screenshots"



@contextlib.contextmanager
def streamlit_server(db_url: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start the dashboard as ``python -m app ui`` would; yield its base URL; stop it."""
    port = free_port()
    child_env = {**os.environ, **proxy_environment(Settings()), "SWEETSPOT_DB_URL": db_url, "PYTHONPATH": str(ROOT), **(env or {})}
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


def wait_healthy(base: str, proc: subprocess.Popen[bytes], timeout: float = STEP_BOUND_S) -> None:
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


def wait_rendered(page: Any, charts: int, timeout_ms: float = STEP_BOUND_S * 1000) -> None:
    """Until the script finished running and ``charts`` Vega charts are drawn with a size (the bound:
    tests/support/waiting.py's; 45 s ended every page of tests/test_ui_every_range.py in a run at
    load average 30-68)."""
    page.wait_for_function(RENDERED_JS, arg=charts, timeout=timeout_ms, polling=50)


# Streamlit greys out the elements of a run in progress (data-stale="true"); a live page's fragment
# reruns every ui.refresh_s, so a screenshot taken at the wrong moment shows a greyed-out page.
SETTLED_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return app && app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-stale="true"]');
}"""


def screenshot(page: Any, path: Path, meta: dict[str, Any] | None = None) -> None:
    """The whole page: Streamlit scrolls inside its main block, so grow the viewport to fit it first.

    Taken once no run is in progress and nothing is greyed out. ``meta`` (what the page showed: its
    charts, panels, banners) is stored in the PNG itself (a tEXt chunk, :func:`png_meta` reads it), so
    a copy in docs/ carries what it shows and a test can tell when the page has changed since.
    """
    height = page.evaluate(
        "() => Math.max(document.body.scrollHeight,"
        " document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight || 0)"
    )
    page.set_viewport_size({"width": 1440, "height": min(int(height) + 40, 6000)})
    page.wait_for_timeout(400)  # let Vega re-lay out after the resize
    for _ in range(5):  # a live page's rerun may start between the wait and the shot: take it again
        page.wait_for_function(SETTLED_JS, timeout=30000, polling=50)
        png = page.screenshot(full_page=True)
        stale = page.locator('[data-stale="true"]').count()
        if not stale:
            break
    if meta is not None:
        png = png_with_meta(png, {**meta, "stale": stale})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)


PNG_KEY = b"sweetspot"


def png_with_meta(png: bytes, meta: dict[str, Any]) -> bytes:
    """``png`` with ``meta`` as JSON in a tEXt chunk right after the header (IHDR: bytes 8 to 33)."""
    body = PNG_KEY + b"\0" + json.dumps(meta, ensure_ascii=True, sort_keys=True).encode("ascii")
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    return png[:33] + chunk + png[33:]


def png_meta(path: Path) -> dict[str, Any] | None:
    """The ``meta`` :func:`screenshot` stored in the PNG at ``path``; None when it holds none."""
    data, at = path.read_bytes(), 8
    while at + 8 <= len(data):
        (length,), kind = struct.unpack(">I", data[at : at + 4]), data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        if kind == b"tEXt" and body.startswith(PNG_KEY + b"\0"):
            return dict(json.loads(body[len(PNG_KEY) + 1 :]))
        at += 12 + length
    return None


# The Vega view of a chart element, found through React's fiber (the ref Streamlit keeps it in); null
# when not found. Shared by PANELS_JS and LAYOUT_JS.
FIND_VIEW_JS = """function findView(el) {
  let view = null;
  const seen = new Set();
  const look = (obj, depth) => {
    if (view || !obj || typeof obj !== 'object' || seen.has(obj) || depth > 3) return;
    seen.add(obj);
    if (typeof obj.scenegraph === 'function' && typeof obj.runAsync === 'function') { view = obj; return; }
    for (const k of Object.keys(obj)) { try { look(obj[k], depth + 1); } catch (e) {} }
  };
  for (let node = el; node && !view; node = node.parentElement) {
    const key = Object.keys(node).find(k => k.startsWith('__reactFiber'));
    for (let f = key && node[key], j = 0; f && j < 30 && !view; f = f.return, j++) {
      for (let s = f.memoizedState, n = 0; s && n < 60 && !view; s = s.next, n++) look(s.memoizedState, 0);
    }
  }
  return view;
}
"""

# What each Vega chart of the page drew, panel by panel, read from its scene graph (the charts draw on
# a canvas: there is no DOM to count). The view is found through React's fiber of the chart element,
# the ref Streamlit keeps it in. Per panel: its title, plot height, and per leaf mark its type, the
# points with finite coordinates ("finite"), those actually visible ("drawn": a line point needs a
# defined neighbour, else it is a lone point of a broken line and draws nothing) and those outside
# the plot ("outside": clipped by an axis that does not cover them).
PANELS_JS = """() => {
  """ + FIND_VIEW_JS + """
  const views = [];
  for (const el of document.querySelectorAll('[data-testid="stVegaLiteChart"]')) {
    const view = findView(el);
    views.push(view ? {panels: panels(view), fits: fits(view, el)} : null);
  }
  return views;

  function fits(view, el) {
    // everything drawn (legends, titles, axes) lies inside the canvas: nothing is cut off
    // (the element's box, not the canvas's: the element clips a wider canvas)
    const b = view.scenegraph().root.bounds, [ox, oy] = view.origin(), c = el.querySelector('canvas, svg.marks');
    if (!c) return true;
    const box = el.getBoundingClientRect(), at = c.getBoundingClientRect();
    const x1 = at.left - box.left + ox + b.x1, x2 = at.left - box.left + ox + b.x2;
    const y1 = at.top - box.top + oy + b.y1, y2 = at.top - box.top + oy + b.y2;
    return (x1 >= -1 && y1 >= -1 && x2 <= box.width + 1 && y2 <= box.height + 1)
      || {x1, x2, y1, y2, width: box.width, height: box.height};
  }
  function panels(view) {
    const root = view.scenegraph().root.items[0];
    const groups = (root.items || []).filter(m => m.marktype === 'group' && m.role === 'scope' && /_group$/.test(m.name));  // concat panels, not a line's pathgroup
    const items = groups.length ? groups.map(g => g.items[0]) : [root];
    return items.map(item => {
      const title = (item.items || []).filter(m => m.role === 'title').flatMap(m => m.items)
        .flatMap(t => (t.items || []).flatMap(m => m.items || [])).map(t => [].concat(t.text).join(' ')).join(' ');
      const marks = [];
      leaves(item, item.height, marks);
      return {title, height: item.height, marks};
    });
  }
  function leaves(group, height, out) {
    for (const mark of group.items || []) {
      if (mark.marktype === 'group') { for (const g of mark.items || []) leaves(g, height, out); continue; }
      if (mark.role !== 'mark' && !/_marks$/.test(mark.name || '')) continue;
      const its = mark.items || [];
      const ok = it => it.defined !== false && Number.isFinite(it.x) && Number.isFinite(it.y);
      const line = mark.marktype === 'line' || mark.marktype === 'area';
      let drawn = 0, outside = 0;
      its.forEach((it, i) => {
        if (!ok(it)) return;
        if (!line || (i > 0 && ok(its[i - 1])) || (i + 1 < its.length && ok(its[i + 1]))) drawn++;
        const ys = [it.y, it.y2].filter(Number.isFinite);
        if (ys.some(y => y < -0.5 || y > height + 0.5)) outside++;
      });
      out.push({name: mark.name, type: mark.marktype, finite: its.filter(ok).length, drawn, outside});
    }
  }
}"""


def chart_panels(page: Any) -> list[Any]:
    """Per Vega chart of ``page``: ``{"panels": [...], "fits": True or the overflowing bounds}`` as
    :data:`PANELS_JS` reads them (None: the chart's view was not found)."""
    return list(page.evaluate(PANELS_JS))


# Where a chart's texts and threshold lines fall, per Vega chart of the page, read from its scene graph
# (absolute canvas coordinates): each axis's visible tick labels (``ticks``: {orient, count, labels}),
# the pairs of visible texts that overlap (labels of marks, axes, legends, titles), the rules that
# strike through an axis label (``struck``), and per plot the line and rule points that lie on its
# bottom edge, under the x axis (``on_edge``: a series at 0 drawn where nobody sees it).
LAYOUT_JS = """() => {
  """ + FIND_VIEW_JS + """
  const out = [];
  let texts, rules, ticks, onEdge, cut, current;
  const measure = document.createElement('canvas').getContext('2d');
  for (const el of document.querySelectorAll('[data-testid="stVegaLiteChart"]')) {
    const view = findView(el);
    if (!view) { out.push(null); continue; }
    current = view;
    texts = []; rules = []; ticks = []; onEdge = []; cut = [];
    for (const g of view.scenegraph().root.items || []) walk(g, g.x || 0, g.y || 0, null, null);
    const overlaps = [];
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i], b = texts[j];
      if (a.role === b.role && a.role !== 'mark') continue;  // an axis's or legend's own labels: Vega's labelOverlap
      if (a.x1 < b.x2 - 1 && b.x1 < a.x2 - 1 && a.y1 < b.y2 - 1 && b.y1 < a.y2 - 1) overlaps.push([a.text, b.text]);
    }
    const struck = [];
    for (const r of rules) for (const t of texts) {
      if (t.role !== 'axis-label') continue;
      const horizontal = Math.abs(r.y1 - r.y2) < 1, vertical = Math.abs(r.x1 - r.x2) < 1;
      const crosses = horizontal ? (r.y1 > t.y1 + 1 && r.y1 < t.y2 - 1 && Math.min(r.x1, r.x2) < t.x2 && Math.max(r.x1, r.x2) > t.x1)
        : vertical ? (r.x1 > t.x1 + 1 && r.x1 < t.x2 - 1 && Math.min(r.y1, r.y2) < t.y2 && Math.max(r.y1, r.y2) > t.y1) : false;
      if (crosses) struck.push([r.name, t.text]);
    }
    const legends = texts.filter(t => t.role === 'legend-label').map(t => t.text);
    out.push({ticks, overlaps, struck, on_edge: onEdge, cut, legends});
  }
  return out;

  // Vega draws a text wider than its item's limit cut short with "…" (the scene keeps the whole
  // text): measured here as Vega measures it, on a canvas, in the item's own font
  function isCut(it) {
    if (!(it.limit > 0)) return false;
    const size = it.fontSize || 11, family = it.font || 'sans-serif';
    measure.font = [it.fontStyle, it.fontVariant, it.fontWeight].filter(Boolean).join(' ') + ' ' + size + 'px ' + family;
    return [].concat(it.text).some(line => measure.measureText(String(line)).width > it.limit + 0.5);
  }

  // a discrete axis (band, point) labels every category it has: its crowding is two labels drawn
  // over each other, not their count (a continuous axis chooses its ticks, and 26 was too many)
  function axisTicks(ax) {
    let type = '';
    try { const s = ax.scale && current.scale(ax.scale); type = (s && s.type) || ''; } catch (e) { type = ''; }
    const discrete = ['band', 'point', 'ordinal'].includes(type), crowded = [];
    for (let i = 0; discrete && i < ax.boxes.length; i++) for (let j = i + 1; j < ax.boxes.length; j++) {
      const a = ax.boxes[i], b = ax.boxes[j];
      if (a.x1 < b.x2 - 1 && b.x1 < a.x2 - 1 && a.y1 < b.y2 - 1 && b.y1 < a.y2 - 1) crowded.push([a.text, b.text]);
    }
    return {orient: ax.orient, count: ax.labels.length, labels: ax.labels.slice(0, 40), scale: type, discrete, crowded};
  }

  function walk(node, ox, oy, plot, axis) {
    for (const mark of node.items || []) {
      const role = mark.role || '';
      if (mark.marktype === 'group') {
        for (const g of mark.items || []) {
          // a plot (a concat panel or a single view: the group holding marks with a height) sets the edge
          const inner = (role === 'scope' || role === 'frame' || !plot) && g.height ? {bottom: oy + (g.y || 0) + g.height, name: g.name} : plot;
          const ax = role === 'axis' ? {orient: (g.datum && g.datum.orient) || '', scale: g.datum && g.datum.scale, labels: [], boxes: []} : axis;
          walk(g, ox + (g.x || 0), oy + (g.y || 0), role === 'axis' ? plot : inner, ax);
          if (role === 'axis' && ax.labels.length) ticks.push(axisTicks(ax));
        }
        continue;
      }
      for (const it of mark.items || []) {
        if (it.opacity === 0 || it.fillOpacity === 0) continue;
        const b = it.bounds;
        if (mark.marktype === 'text' && b && String(it.text || '').trim()) {
          if (isCut(it)) cut.push([role, [].concat(it.text).join(' ')]);
          texts.push({role, text: [].concat(it.text).join(' '), x1: ox + b.x1, x2: ox + b.x2, y1: oy + b.y1, y2: oy + b.y2});
          if (role === 'axis-label' && axis) { axis.labels.push([].concat(it.text).join(' ')); axis.boxes.push(texts[texts.length - 1]); }
        }
        if (role === 'mark' && mark.marktype === 'rule' && Number.isFinite(it.x) && Number.isFinite(it.y)) {
          const x2 = Number.isFinite(it.x2) ? it.x2 : it.x, y2 = Number.isFinite(it.y2) ? it.y2 : it.y;
          rules.push({name: mark.name, x1: ox + it.x, x2: ox + x2, y1: oy + it.y, y2: oy + y2});
          if (plot && Math.abs(it.y - y2) < 1 && oy + it.y >= plot.bottom - 0.5) onEdge.push(mark.name);
        }
        if (role === 'mark' && (mark.marktype === 'line') && plot && Number.isFinite(it.y) && it.defined !== false
            && oy + it.y >= plot.bottom - 0.5) onEdge.push(mark.name);
      }
    }
  }
}"""


def chart_layout(page: Any) -> list[Any]:
    """Per Vega chart of ``page``: ``{"ticks", "overlaps", "struck", "on_edge", "cut", "legends"}`` as :data:`LAYOUT_JS`
    reads them (None: the chart's view was not found)."""
    return list(page.evaluate(LAYOUT_JS))


MAX_TICK_LABELS = 15  # per axis: a page-wide concurrency axis carried ~31 (0.0 to 3.0 by 0.1)


def layout_defects(layout: list[Any]) -> list[str]:
    """What :func:`chart_layout` found wrong, one line each; empty when every chart reads cleanly:
    a text (a legend's label, an axis label, a title) cut short by its limit, a continuous axis with more than :data:`MAX_TICK_LABELS` labels (a category axis labels each of its
    categories: there, two of its labels drawn over each other), texts drawn over each other, a rule through
    an axis label, a line or rule of a series lying on the plot's bottom edge (under the x axis)."""
    found = []
    for i, chart in enumerate(layout):
        if chart is None:
            found.append(f"chart {i}: its Vega view was not found")
            continue
        found += [f"chart {i}: {t['count']} tick labels on one axis: {t['labels'][:5]}…" for t in chart["ticks"]
                  if t["count"] > MAX_TICK_LABELS and not t.get("discrete")]  # fmt: skip
        found += [f"chart {i}: labels of one category axis drawn over each other: {a!r} and {b!r}"
                  for t in chart["ticks"] for a, b in t.get("crowded", [])]  # fmt: skip
        found += [f"chart {i}: texts overlap: {a!r} and {b!r}" for a, b in chart["overlaps"]]
        found += [f"chart {i}: {rule} strikes through the axis label {label!r}" for rule, label in chart["struck"]]
        found += [f"chart {i}: {name} drawn on the plot's bottom edge (a series at 0 hidden by the x axis)"
                  for name in sorted(set(chart["on_edge"]))]  # fmt: skip
        found += [f"chart {i}: {role or 'a'} text cut short with '…': {text!r}" for role, text in chart.get("cut", [])]
    return found
