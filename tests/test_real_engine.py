"""The product against a real vLLM (0.32, the CPU build from PyPI, tests/vllm_engine.py), measured
with vLLM's own ``vllm bench serve``: what the collector stores must be what the engine counted.

One server is shared by the module (its start costs a minute or more), restarted once for the
counter-reset test; the preemption storm has a server of its own with a 40-block KV cache. Each test
runs the product's real collector (``python -m app collect``) into a SQLite file of its own; the
collector's first round is a baseline, so what the server did for earlier tests is not counted.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from collectors.catalogue import CATALOGUE
from db.engine import open_reader
from tests.support.client_quantiles import client_quantile_floor
from tests.support.smtp_server import Mailbox, serve
from tests.test_alerts_e2e import wait_for
from tests.test_notify_e2e import PREEMPTIONS_ALONE
from tests.test_sim_fidelity import check as check_simulator
from tests.vllm_engine import EngineUnavailable, VllmServer, engine_python, model_dir

pytestmark = [pytest.mark.engine, pytest.mark.slow, pytest.mark.timeout(1500)]
ROOT = Path(__file__).resolve().parent.parent
TARGET = "real"


def require_engine() -> None:
    try:
        engine_python()
        model_dir()
    except EngineUnavailable as exc:
        if os.environ.get("CI"):  # CI installs it (.ci/run): a skip there would hide a broken install
            pytest.fail(f"vLLM (CPU) unavailable although CI is set: {exc}")
        pytest.skip(f"vLLM (CPU) cannot be installed here: {exc}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    require_engine()
    engine = VllmServer(tmp_path_factory.mktemp("vllm"))
    try:
        yield engine
    finally:
        engine.stop()


def app(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def collector(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "app", *cmd], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def collect(server: VllmServer, db_url: str, log: Path) -> subprocess.Popen[bytes]:
    return collector(["collect", "--vllm-url", server.metrics_url, "--name", TARGET, "--db", db_url, "--interval", "1s"], log)


def stored(db_url: str) -> dict[str, Any]:
    """Sums of the stored increases and the newest successful round's time."""
    engine = open_reader(db_url)
    try:
        with engine.connect() as conn:
            sums = conn.execute(text("SELECT sum(request_success), sum(generation_tokens), sum(prompt_tokens), "
                                     "sum(preemptions) FROM samples")).one()  # fmt: skip
            last = conn.execute(text("SELECT max(ts) FROM scrapes WHERE up = 1")).scalar()
            down = conn.execute(text("SELECT count(*) FROM scrapes WHERE up = 0")).scalar()
    finally:
        engine.dispose()
    requests, output, prompt, preemptions = (int(v or 0) for v in sums)
    return {"requests": requests, "output": output, "prompt": prompt, "preemptions": preemptions,
            "last_up": last or 0, "down": down}  # fmt: skip


def round_after(db_url: str, t: float) -> dict[str, Any]:
    """The stored sums once a successful round later than ``t`` (wall clock, the collector's) is in."""
    return wait_for(lambda: (s := stored(db_url))["last_up"] > t + 1 and s, 120, f"a round stored after {t:.0f}")


def counted(bench: dict[str, Any]) -> dict[str, int]:
    return {"requests": bench["completed"], "output": bench["total_output_tokens"], "prompt": bench["total_input_tokens"]}


def test_stored_counts_equal_the_bench_across_a_restart(server: VllmServer, tmp_path: Path):
    db_url = f"sqlite:///{tmp_path}/counts.db"
    proc = collect(server, db_url, tmp_path / "collector.log")
    try:
        round_after(db_url, time.time() - 1)  # the baseline round
        first = server.bench(tmp_path / "a", num_prompts=20, random_input_len=64, random_output_len=32)
        round_after(db_url, time.time())  # every increase of the first engine is in before it goes
        server.restart()
        second = server.bench(tmp_path / "b", num_prompts=12, random_input_len=96, random_output_len=24)
        after = round_after(db_url, time.time())
        page = totals(server.page())
    finally:
        stop(proc)
    bench = {k: counted(first)[k] + counted(second)[k] for k in ("requests", "output", "prompt")}
    assert first["failed"] == second["failed"] == 0
    # the new engine counted the second run alone: its counters started again from zero
    assert page == counted(second)
    assert after["down"] > 0, "the restart left no failed scrape: was the engine restarted?"
    assert {k: after[k] for k in bench} == bench


def test_kv_bytes_per_token_are_read_from_the_engine_and_the_shape_from_its_config(server: VllmServer, tmp_path: Path):
    """Issue 29: the step model's KV bytes per token come from the engine itself (cache_config_info:
    kv_cache_memory_bytes ÷ kv_cache_size_tokens), and agree with the model's config.json, from which
    the weights a target leaves unset are read (app/model_shapes.py)."""
    from core.model_shape import load_config, shape_of
    from db.queries import Reader

    config = model_dir() / "config.json"
    settings = tmp_path / "sweetspot.toml"
    db_url = f"sqlite:///{tmp_path}/kv.db"
    settings.write_text(f'db_url = "{db_url}"\ninterval_s = "1s"\n[[targets]]\nname = "{TARGET}"\n'
                        f'vllm_url = "{server.metrics_url}"\nmodel_config = "{config}"\n'
                        '[targets.ceiling]\ntensor_parallel = 1\nbandwidth_gbps = 100.0\n')  # fmt: skip
    proc = collector(["--config", str(settings), "collect"], tmp_path / "collector.log")
    try:
        round_after(db_url, time.time())
        round_after(db_url, time.time())  # the shape is stored after the first page named the model
    finally:
        stop(proc)
    f = Reader(db_url).window(TARGET, time.time(), 120)
    shape = shape_of(load_config(config))
    assert f.ceiling is not None and f.ceiling.kv_source == "cache_config_info"
    assert f.ceiling.kv_bytes_per_token == shape.kv_bytes_per_token == 2048  # the engine's own figure, its config's too
    assert f.ceiling.shape_source == f"config.json ({config})"
    assert f.ceiling.weight_gb == pytest.approx(shape.step_weight_bytes / 1e9)


def totals(page: str) -> dict[str, int]:
    found = {"requests": 0.0, "output": 0.0, "prompt": 0.0}
    names = {"vllm:request_success": "requests", "vllm:generation_tokens": "output", "vllm:prompt_tokens": "prompt"}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if sample.name.endswith("_total") and (key := names.get(family.name)):
                found[key] += sample.value
    return {k: int(v) for k, v in found.items()}


def buckets(page: str, family_name: str) -> dict[float, float]:
    """Cumulative bucket counts of one histogram family, summed over its series (le → count)."""
    out: dict[float, float] = {}
    for family in text_string_to_metric_families(page):
        if family.name == family_name:
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    le = float(sample.labels["le"])
                    out[le] = out.get(le, 0.0) + sample.value
    return out


def histogram_quantile(q: float, before: dict[float, float], after: dict[float, float]) -> tuple[float, float, float]:
    """Prometheus's ``histogram_quantile(q, increase(...))``, written out here apart from the product's
    own: (value, lower bound, upper bound of the bucket holding it)."""
    bounds = sorted(after)
    cumulative = [after[b] - before.get(b, 0.0) for b in bounds]
    rank = q * cumulative[-1]
    for i, (bound, count) in enumerate(zip(bounds, cumulative, strict=True)):
        if count >= rank:
            lo = bounds[i - 1] if i else 0.0
            below = cumulative[i - 1] if i else 0.0
            if math.isinf(bound):
                return lo, lo, bound
            return lo + (bound - lo) * (rank - below) / (count - below), lo, bound
    raise AssertionError("no bucket holds the rank")


LATENCIES = {"ttft": "vllm:time_to_first_token_seconds", "itl": "vllm:inter_token_latency_seconds",
             "e2e": "vllm:e2e_request_latency_seconds"}  # fmt: skip
CLIENT = {"ttft": "p95_ttft_ms", "itl": "p95_itl_ms", "e2e": "p95_e2el_ms"}


def test_stored_p95s_are_histogram_quantile_over_the_runs_buckets(server: VllmServer, tmp_path: Path):
    db_url = f"sqlite:///{tmp_path}/quantiles.db"
    proc = collect(server, db_url, tmp_path / "collector.log")
    try:
        round_after(db_url, time.time() - 1)
        before = server.page()  # the server is idle: the same state the baseline round read
        bench = server.bench(tmp_path / "q", num_prompts=40, random_input_len=128, random_output_len=48, max_concurrency=8)
        round_after(db_url, time.time())
        after = server.page()
    finally:
        stop(proc)
    status = json.loads(app("status", "--db", db_url, "--target", TARGET, "--window", "1h", "--json").stdout)
    outside = []
    for figure, family in LATENCIES.items():
        value, lo, hi = histogram_quantile(0.95, buckets(before, family), buckets(after, family))
        assert status[f"{figure}_p95_s"] == pytest.approx(value, rel=1e-9), figure
        assert status[f"{figure}_p95_bucket"] == [lo, hi], figure
        client = bench[CLIENT[figure]] / 1000
        print(f"{figure} P95: engine {value:.4f} s in ({lo:g}, {hi:g}], client {client:.4f} s")
        if figure != "itl" and not lo < client:
            outside.append(f"{figure}: client P95 {client:.4f} s below ({lo:g}, {hi:g}] holding the server's {value:.4f} s")
    # The client times every request from before the engine's clock starts to after its last token
    # reaches it (HTTP, tokenising, streaming), so its TTFT and E2E P95 never lie below the bucket
    # holding the engine's. How far above depends on how much CPU the client got: on a quiet machine
    # the same bucket (docs/metrics.md: 1.167 s against 1.900 s in (1, 2.5]), on this one shared by
    # the whole suite up to twice the engine's figure, so no upper bound is asserted. The client's ITL
    # is per received chunk (several tokens when the client reads late): no order holds for it.
    assert not outside, outside


def test_inspect_names_every_catalogue_family_of_the_live_page(server: VllmServer):
    page = server.page()
    exposed = {f.name for f in text_string_to_metric_families(page)}
    exposed |= {f"{name}_total" for name in exposed}  # counters lose _total in the parser's family names
    report = json.loads(app("inspect", server.metrics_url, "--json").stdout)
    for spec in CATALOGUE:
        live = [name for name in spec.names if name in exposed]
        if live:
            assert report["metric_names_used"].get(spec.key) == live[0], spec.key
            assert spec.key not in report["missing"], spec.key
    # what the page is said to be: no name of it is put down to another version than the one running
    wrong = {k: v for k, v in report["metric_versions"].items() if "0.33" in v or "<=" in v or "V0" in v}
    assert not wrong, wrong
    assert report["engine"] == "vllm" and report["model_names"] == ["tiny-llama"]
    assert not report["incomplete_histograms"]


def test_the_simulator_exposes_what_the_live_engine_exposes(server: VllmServer):
    check_simulator(server.page())  # as tests/test_sim_fidelity.py does with the page kept under tests/data/


def sum_and_count(page: str, family_name: str) -> tuple[float, float]:
    """``_sum`` and ``_count`` of one histogram family, summed over its series."""
    samples = [s for f in text_string_to_metric_families(page) if f.name == family_name for s in f.samples]
    return (sum(s.value for s in samples if s.name.endswith("_sum")),
            sum(s.value for s in samples if s.name.endswith("_count")))  # fmt: skip


def mean_itl(before: str, after: str) -> float:
    """The engine's mean inter-token latency between two pages: its decode pace over a run."""
    (s0, c0), (s1, c1) = sum_and_count(before, LATENCIES["itl"]), sum_and_count(after, LATENCIES["itl"])
    return (s1 - s0) / max(c1 - c0, 1.0)


def sweep_once(server: VllmServer, out: Path) -> tuple[dict[str, Any], str, str]:
    """One sweep at concurrency 4 (``short`` mix, 22 s, no warm-up), checked exactly against the
    engine's own counters and buckets over its span; its level and the pages before and after it."""
    before = server.page()
    done = app("sweep", "--url", f"{server.base_url}/v1", "--concurrency", "4", "--duration", "22s", "--warmup", "0",
               "--mix", "short:1", "--no-store", "--json", str(out), timeout=600)  # fmt: skip
    after = server.page()
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    (level,), (engine_side,) = doc["levels"], doc["recommendation"]["engine"]
    swept, engine = totals(before), totals(after)
    assert level["errors"] == 0 and level["requests"] == engine["requests"] - swept["requests"]  # drained
    # the sweep counted the engine's tokens exactly: every request whole, with the server's usage
    assert level["tokens_per_s"] * level["duration_s"] == pytest.approx(engine["output"] - swept["output"], abs=0.5)
    # and its engine-side figures are the engine's counter and buckets over the same span
    assert engine_side["tokens_per_s"] == pytest.approx(level["tokens_per_s"], rel=0.02)
    value, lo, hi = histogram_quantile(0.95, buckets(before, LATENCIES["ttft"]), buckets(after, LATENCIES["ttft"]))
    assert engine_side["ttft_p95_s"] == pytest.approx(value, rel=1e-9) and engine_side["ttft_p95_bucket"] == [lo, hi]
    return level, before, after


@dataclass
class Agreement:
    """One sweep · bench · sweep run: each client's output tok/s and the engine's mean ITL over it."""

    tok_s: dict[str, float]
    itl_s: dict[str, float]
    lines: list[str]

    def at_once(self, client: str) -> float:
        """Requests the engine decoded at once on average over that client's run: tok/s × mean ITL."""
        return self.tok_s[client] * self.itl_s[client]


def sweep_bench_sweep(server: VllmServer, folder: Path) -> Agreement:
    """A sweep at concurrency 4 with no warm-up, then ``vllm bench serve`` with the same request count,
    concurrency and lengths, then the sweep again, against the same server one after the other. Each
    client's tokens are held exactly to the engine's counters over its run; each client's TTFT P95
    above the edge the engine's buckets and the request count make certain (bench/bench_sweep_agreement.py
    repeats this)."""
    folder.mkdir(parents=True, exist_ok=True)
    first, before, middle = sweep_once(server, folder / "first.json")
    swept, engine = totals(before), totals(middle)
    sent = engine["requests"] - swept["requests"]
    # the same requests for the bench: the count, the mean prompt as the engine tokenised it and the
    # mean output the engine made (the bench ignores EOS; a few of the sweep's requests stop early)
    prompt_len = round((engine["prompt"] - swept["prompt"]) / sent)
    output_len = round((engine["output"] - swept["output"]) / sent)
    # no ready check: its lone test request would run inside the bench's engine figures, at batch 1
    bench = server.bench(folder / "s", num_prompts=sent, random_input_len=prompt_len, random_output_len=output_len,
                         random_range_ratio=0.45, max_concurrency=4, ready_check_timeout_sec=0)  # fmt: skip
    after = server.page()
    assert bench["failed"] == 0 and bench["total_output_tokens"] == totals(after)["output"] - engine["output"]
    second, again, last = sweep_once(server, folder / "second.json")
    runs = {"sweep 1": (first["tokens_per_s"], first["ttft_p95_s"], before, middle),
            "bench": (bench["output_throughput"], bench["p95_ttft_ms"] / 1000, middle, after),
            "sweep 2": (second["tokens_per_s"], second["ttft_p95_s"], again, last)}  # fmt: skip
    found = Agreement({}, {}, [])
    for client, (tok_s, p95, one, two) in runs.items():
        engine_before, engine_after = buckets(one, LATENCIES["ttft"]), buckets(two, LATENCIES["ttft"])
        _, lo, hi = histogram_quantile(0.95, engine_before, engine_after)
        floor = client_quantile_floor(0.95, engine_before, engine_after)
        found.tok_s[client], found.itl_s[client] = tok_s, mean_itl(one, two)
        found.lines.append(f"{client}: {tok_s:.1f} tok/s, client TTFT P95 {p95:.3f} s, engine's bucket ({lo:g}, {hi:g}], "
                           f"above {floor:g} s by its count, engine's mean ITL {found.itl_s[client] * 1000:.1f} ms, "
                           f"{found.at_once(client):.2f} decoding at once")  # fmt: skip
        # the client cannot see a first token before the engine made it; it adds the API server's own
        # time (HTTP, tokenising the prompt before the engine's clock starts, streaming) and, on a
        # machine shared by the whole suite, however long it waited for a core: no upper bound holds
        # (docs/sweep.md: measured up to two buckets above on this machine). The lower bound is the
        # one the request count makes exact, not the engine's bucket (:func:`client_quantile_floor`).
        assert floor < p95 or floor == 0.0, f"{client}: TTFT P95 {p95:.3f} s, not above {floor:g} s ({found.lines[-1]})"
    return found


def test_the_sweep_agrees_with_vllm_bench_serve(server: VllmServer, tmp_path: Path):
    """:func:`sweep_bench_sweep`: the token counts exact, and no gross disagreement at the engine's
    pace. How close the two clients come is a measurement, not a check: under the whole suite's load
    the same sweep read 2.59 and 3.67 requests decoding at once two minutes apart, and the bench 2.80
    between sweeps of 3.33 and 3.67 (the clients and the API server starve for a core). The 10 %
    agreement is measured alone on the machine by bench/bench_sweep_agreement.py (docs/sweep.md)."""
    found = sweep_bench_sweep(server, tmp_path)
    print("; ".join(found.lines))
    # Gross disagreement: the bench outside the sweeps' range widened by 30 % (every run under load
    # so far lay within 16 % of it). tok/s × the engine's mean ITL takes the engine's speed out: a
    # slower engine moves tok/s and the ITL in opposite directions and leaves it.
    low, high = sorted((found.at_once("sweep 1"), found.at_once("sweep 2")))
    assert 0.7 * low <= found.at_once("bench") <= 1.3 * high, found.lines


def test_a_real_preemption_storm_fires_the_alert_and_mails_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    require_engine()
    # 40 blocks of 32 tokens hold under three of the sixteen 450-token requests at once
    engine = VllmServer(tmp_path, ["--num-gpu-blocks-override", "40", "--block-size", "32", "--max-num-seqs", "16",
                                   "--max-model-len", "1024"])  # fmt: skip
    db_url = f"sqlite:///{tmp_path}/storm.db"
    cfg = tmp_path / "sweetspot.toml"
    cfg.write_text(f"""
db_url = "{db_url}"
interval_s = "1s"

[alerts]
evaluate_every_s = "1s"
lease_s = "3s"
{PREEMPTIONS_ALONE}
[alerts.email]
group_wait_s = "1s"

[[targets]]
name = "{TARGET}"
vllm_url = "{engine.metrics_url}"
""")
    mailbox = Mailbox()
    try:
        with serve(mailbox) as port:
            for name, value in {"SWEETSPOT_SMTP_HOST": "127.0.0.1", "SWEETSPOT_SMTP_PORT": str(port),
                                "SWEETSPOT_SMTP_TLS": "none", "SWEETSPOT_ALERT_FROM": "sweetspot@example.test",
                                "SWEETSPOT_ALERT_TO": "oncall@example.test"}.items():  # fmt: skip
                monkeypatch.setenv(name, value)
            proc = collector(["--config", str(cfg), "collect"], tmp_path / "collector.log")
            try:
                round_after(db_url, time.time() - 1)
                bench = engine.bench(tmp_path / "storm", num_prompts=16, random_input_len=100, random_output_len=350,
                                     max_concurrency=16)  # fmt: skip
                after = round_after(db_url, time.time())
                wait_for(lambda: mailbox.messages, 120, "the alert e-mail")
                status = json.loads(app("--config", str(cfg), "status", "--window", "1h", "--json").stdout)
            finally:
                stop(proc)
        preempted = totals_of(engine.page(), "vllm:num_preemptions")
    finally:
        engine.stop()
    assert bench["completed"] == 16 and preempted > 0
    assert after["preemptions"] == preempted
    assert status["state"] == "outside" and any("preemptions" in r for r in status["reasons"])
    (msg,) = mailbox.messages[:1]
    assert "preemptions" in msg["Subject"] and f"{TARGET}" in msg["Subject"], msg["Subject"]
    assert "--max-num-seqs" in msg.get_body(("plain",)).get_content()


def totals_of(page: str, family_name: str) -> int:
    return int(sum(s.value for f in text_string_to_metric_families(page) if f.name == family_name
                   for s in f.samples if s.name.endswith("_total")))  # fmt: skip


def test_a_stopped_collector_reads_stale_and_a_removed_targets_alert_ends_on_the_real_engine(
    server: VllmServer, tmp_path: Path
):
    # issue 28: the real engine keeps serving; the collector stops (stale within 2 × 1 s + 0.8 s), then
    # comes back with the target removed from its configuration (its firing alert ends, once)
    from app.alerts import store
    from app.alerts.evaluator import TARGET_REMOVED
    from app.alerts.model import FIRING, RESOLVED
    from db.engine import open_engine

    db_url = f"sqlite:///{tmp_path}/stale.db"
    head = (f'db_url = "{db_url}"\ninterval_s = "1s"\nscrape_timeout_s = "0.8s"\n[alerts]\nevaluate_every_s = "1s"\n'
            'lease_s = "3s"\n[[alerts.rules]]\nname = "ttft_p95"\nfor = "0s"\n')  # fmt: skip
    real = f'[[targets]]\nname = "{TARGET}"\nvllm_url = "{server.metrics_url}"\n[targets.sweetspot]\nttft_p95_slo_s = "1ms"\n'
    other = '[[targets]]\nname = "other"\nvllm_url = "http://127.0.0.1:9/metrics"\n'
    (tmp_path / "with.toml").write_text(head + real + other)
    (tmp_path / "without.toml").write_text(head + other)
    engine = open_engine(db_url)

    def alert() -> Any:
        try:
            return store.load_states(engine).get(("ttft_p95", TARGET, ""))
        except Exception:  # the database is not made yet
            return None

    proc = collector(["--config", str(tmp_path / "with.toml"), "collect"], tmp_path / "collector.log")
    try:
        round_after(db_url, time.time() - 1)
        server.bench(tmp_path / "slo", num_prompts=8, random_input_len=32, random_output_len=16)
        wait_for(lambda: (a := alert()) is not None and a.state == FIRING, 120, "the TTFT alert firing")
        live = json.loads(app("--config", str(tmp_path / "with.toml"), "status", "--json").stdout)
    finally:
        stop(proc)
    stopped = time.time()
    assert live["up"] is True and live["stale_s"] is None
    stale = wait_for(lambda: (s := json.loads(app("--config", str(tmp_path / "with.toml"), "status", "--json",
                                                  "--window", "1h").stdout))["up"] is False and s, 60, "status stale")
    assert stale["stale_s"] > 2.8 and stale["reasons"][0].startswith("stale: not scraped for")
    assert time.time() - stopped < 2.8 + 15.0  # read stale as soon as asked after 2 intervals + the timeout
    proc = collector(["--config", str(tmp_path / "without.toml"), "collect"], tmp_path / "collector.log")
    try:
        ended = wait_for(lambda: (a := alert()) is not None and a.state == RESOLVED and a, 60, "the removed target's alert ended")
    finally:
        stop(proc)
        engine.dispose()
    assert ended.state == RESOLVED and ended.summary == TARGET_REMOVED
