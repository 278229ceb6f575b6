"""Every ``python -m app`` command written in README.md and docs/ is run here (issue 14: the
README's ``sweep --url http://HOST:8000/v1`` failed with "--duration is required").

Each command line is collected from fenced blocks (continuation lines joined, comments dropped)
and inline code; placeholders (HOST, PORT, URL, FILE, SOURCE, NAME) become loopback values, and
``[--json]`` / ``a|b`` expand to every variant. Every command is parsed by the real parser and its
arguments validated as the command itself would; the ones that finish on their own without a
server and write nothing outside it (config, db, status, inspect of a file, sim --calibrate, query,
alerts list/history/rules/backtest/silence list, digest --print) are executed against a scratch
database holding some history, and must exit 0 with output.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PLACEHOLDERS = {"HOST": "{host}", "PORT": "{port}", "URL": "{url}",
                "FILE": "{config}", "SOURCE": "{page}", "NAME": "vllm:num_requests_waiting", "N": "1"}  # fmt: skip
SYNOPSIS = ("<command>", "...")  # "python -m app <command> --help": a pattern, not a command
RUNS_ALONE = {"config", "db", "status", "inspect"}  # finish without a server; the others: see runs_alone
READS_ALERTS = {"list", "history", "rules", "backtest"}


def runs_alone(args) -> bool:
    """Whether the command finishes on its own against the scratch database, without a server, an
    SMTP relay, stdin or a file written elsewhere: what the test executes, not only parses."""
    if args.command == "query":  # not --save (its "SQL" is a placeholder), not bare (reads stdin)
        return not args.save and bool(args.sql or args.canned or args.list or args.schema)
    if args.command == "alerts":
        return args.alerts_command in READS_ALERTS or getattr(args, "silence_action", None) == "list"
    if args.command == "digest":
        return args.print and not (args.html or args.send)
    if args.command == "rules":  # to stdout; -o writes a file elsewhere
        return not args.output
    return args.command in RUNS_ALONE or (args.command == "sim" and args.calibrate)


# the product's CLI, not a module of the package run on its own (``python -m app.reference_doc``:
# tests/test_reference_doc.py runs that one)
_CLI = r"python -m app(?![\w.])"


def _lines(text: str) -> list[str]:
    found = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if re.search(_CLI, line):
                found.append(line.split(" #")[0])
    prose = "\n".join(line for line in text.splitlines() if not line.startswith("#"))  # a heading names, not runs
    found += re.findall(rf"`[^`\n]*?({_CLI}[^`\n]*)`", prose)
    # what a shell pipe feeds the output to (`| jq .state`) is not the command's
    return [re.sub(r"^.*?python -m app", "python -m app", line).split(" | ")[0].strip() for line in found]


def _variants(line: str) -> list[str]:
    """The line with its placeholders filled: without its ``[optional]`` parts and with all of them,
    and once per alternative of each ``a|b``."""
    for flag, value in (("--db URL", "--db {db}"), ("--json FILE", "--json {json}")):
        line = line.replace(flag, value)
    line = re.sub(r"\b(HOST|PORT|URL|FILE|SOURCE|NAME|N)\b", lambda m: PLACEHOLDERS[m.group(1)], line)
    bare, full = re.sub(r"\[[^\]]+\]", "", line), re.sub(r"\[([^\]]+)\]", r"\1", line)
    out = []
    for text in dict.fromkeys((bare, full)):
        alternatives = re.findall(r"\S+\|\S+", text) or [""]
        for alt in alternatives:
            out += [text.replace(alt, choice) for choice in alt.split("|")] if alt else [text]
    return [" ".join(t.split()) for t in out]


def documented() -> list[tuple[str, str]]:
    out = {}
    for doc in DOCS:
        for line in _lines(doc.read_text()):
            if line != "python -m app" and not any(s in line for s in SYNOPSIS):
                for variant in _variants(line):
                    out.setdefault(variant, doc.name)
    return sorted((line, doc) for line, doc in out.items())


def test_the_docs_hold_the_commands_users_copy():
    lines = [line for line, _ in documented()]
    assert "python -m app sweep --url http://{host}:8000/v1" in lines  # the README's example
    assert len(lines) > 25


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    from urllib.parse import urlsplit

    from simulator import SimOptions, start_simulator
    from tests import ui_db

    sim = start_simulator(SimOptions(port=0))  # HOST, PORT and URL: the simulator on loopback
    where = urlsplit(sim.urls["vllm_metrics"])

    folder = tmp_path_factory.mktemp("docs")
    config = folder / "sweetspot.toml"
    config.write_text('[[targets]]\nname = "demo"\nvllm_url = "http://127.0.0.1:8000/metrics"\n')
    page = folder / "metrics.txt"
    page.write_text('# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3\n')
    db = ui_db.fill(folder / "s.db", time.time(), 0.1)
    yield {"config": str(config), "page": str(page), "db": db, "json": str(folder / "sweep.json"),
           "host": where.hostname, "port": str(where.port), "url": sim.urls["vllm_metrics"]}  # fmt: skip
    sim.stop()


def _validate(args) -> None:
    """What each command checks before it starts anything (network, servers, processes)."""
    from app.commands import sweep
    from app.loader import load_settings

    settings = load_settings(getattr(args, "config", None), {})
    if args.command == "sweep":
        args.url, _ = sweep.sweep_target(settings, args.url, args.target)
        sweep._config(args, "?")
    if args.command == "collect" and args.vllm_url:
        from app.commands.collect import quick_target

        quick_target(args)


@pytest.mark.parametrize("line, doc", documented())
def test_every_documented_command_runs(line, doc, scratch):
    # after "python -m app"; only the scratch placeholders are filled (a selector keeps its braces)
    fill = lambda a: re.sub(r"\{(\w+)\}", lambda m: scratch.get(m.group(1), m.group(0)), a)  # noqa: E731
    argv = [fill(a) for a in shlex.split(line)[3:]]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{doc}: `{line}` does not parse (exit {exc.code})")
    if args.command == "ui" and "sweetspot.toml" in argv:  # an example file name: the scratch one stands in
        argv[argv.index("sweetspot.toml")] = scratch["config"]
        args = build_parser().parse_args(argv)
    if "sweetspot.toml" not in argv:
        _validate(args)
    if runs_alone(args):
        env = {"PATH": "/usr/bin:/bin", "SWEETSPOT_DB_URL": scratch["db"]}
        done = subprocess.run([sys.executable, "-m", "app", *argv], cwd=ROOT, capture_output=True, text=True,
                              timeout=120, env=env)  # fmt: skip
        assert done.returncode == 0, f"{doc}: `{line}`: {done.stderr[-500:]}"
        assert done.stdout.strip(), f"{doc}: `{line}` printed nothing"


def test_the_commands_that_read_history_are_run_not_only_parsed():
    run = {line.split()[3] + " " + (line.split() + [""])[4] for line, _ in documented()
           if runs_alone(build_parser().parse_args(shlex.split(line.replace("{", "").replace("}", ""))[3:]))}
    assert {"query --canned", "query --list", "alerts list", "alerts history", "alerts rules", "alerts backtest",
            "digest --since"} <= run, run  # fmt: skip


def _charts_now(shot: str) -> tuple[int, int | None]:
    """(charts, Overview panels) the page of ``shot`` draws today: the browser test's own counts, and
    the Overview's stack built on no data (a new panel there changes it)."""
    from app.ui import charts
    from core.settings import SweetSpotSettings
    from tests import test_ui_every_range as every

    page = next(p for p in [*every.PAGES, *every.OTHER_PAGES] if shot == p or shot.startswith(f"{p}-"))
    count = every.PAGES[page][1] if page in every.PAGES else every.OTHER_PAGES[page][1]
    if page != "overview":
        return count, None
    stack = charts.overview_chart([], charts.Frame(0, 3600, 10), [], charts.Frame(0, 3600, 60), SweetSpotSettings(), None)
    return count, len(stack.vconcat)


def test_the_ui_docs_show_screenshots_the_browser_test_saves():
    from tests import test_ui_every_range as every
    from tests.browser import png_meta

    shown = re.findall(r"\]\(screenshots/([\w-]+)\.png\)", (ROOT / "docs" / "ui.md").read_text())
    saved = {f"{page}-{r}" for page in every.PAGES for r in every.RANGES} | {"overview-past-range", *every.OTHER_PAGES}
    assert shown and set(shown) <= saved
    for name in shown:
        # the browser test stores what each shot showed in the PNG (tests/browser.py: screenshot);
        # a shot without it, or showing fewer charts or panels than the page draws today, is stale
        meta = png_meta(ROOT / "docs" / "screenshots" / f"{name}.png")
        assert meta, f"docs/screenshots/{name}.png was not taken by tests/test_ui_every_range.py: re-shoot it"
        charts, panels = _charts_now(name)
        assert meta["charts"] == charts, f"{name}.png shows {meta['charts']} charts, the page draws {charts}: re-shoot it"
        assert panels is None or len(meta["panels"]) == panels, f"{name}.png: {len(meta['panels'])} panels, not {panels}"
        assert meta["stale"] == 0, f"{name}.png was taken mid-rerun (greyed out)"
        banners = [re.sub(r"^\w+\n+", "", a) for a in meta["alerts"]]  # without the icon's ligature name
        assert panels is None or banners, f"{name}.png shows no verdict banner"
        assert not [b for b in banners if b.startswith("No data")], f"{name}.png shows a No data banner: {banners}"
