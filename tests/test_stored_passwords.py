"""No URL's password or query token reaches the database or the log: a round against real servers on 127.0.0.1
with userinfo or a token in every URL, then the bytes of the SQLite file; migrations 0013 and 0014 mask
older rows."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from app.collection import CollectionService
from core.settings import GatewaySettings, GpuSettings, HttpSettings, Settings, TargetSettings
from db import schema
from db.engine import open_engine
from db.migrations import migrate
from db.writer import Writer
from tests.support.http_server import closed_port_url, started
from tests.support.sources import Sources

ROOT = Path(__file__).resolve().parent.parent

PASSWORDS = ("vllmpw1", "gwpw2", "gpupw3", "proxypw4", "downpw5", "jsonpw6")


@pytest.fixture
def sources() -> Iterator[Callable[[], Sources]]:
    yield from started(lambda: Sources({}))


def with_user(url: str, password: str) -> str:
    return url.replace("http://", f"http://user:{password}@")


def test_no_password_of_any_url_is_stored_or_logged(sources, tmp_path: Path, caplog) -> None:
    server = sources()
    up = TargetSettings(
        name="up", vllm_url=with_user(server.url("/metrics"), "vllmpw1"),
        gateway=GatewaySettings(kind="prometheus", url=with_user(server.url("/gateway"), "gwpw2"), metric="queue"),
        # through a proxy that refuses: the gpu source is down, its error (naming the proxy) stored
        gpu=GpuSettings(source="dcgm", url=with_user(server.url("/dcgm"), "gpupw3"),
                        http=HttpSettings(proxy=with_user(closed_port_url().removesuffix("/metrics"), "proxypw4"))),
    )  # fmt: skip
    down = TargetSettings(
        name="down", vllm_url=with_user(closed_port_url(), "downpw5"),
        gateway=GatewaySettings(kind="json", url=with_user(closed_port_url(), "jsonpw6"), json_path="q"),
    )
    db = tmp_path / "c.db"
    caplog.set_level(logging.DEBUG)
    service = CollectionService(Settings(db_url=f"sqlite:///{db}", scrape_timeout_s=10.0, targets=(up, down)))
    try:
        lines = service.collect_once()
    finally:
        service.close()
    assert lines[0].startswith("up: vLLM up") and "gateway queue=3" in lines[0] and "proxy" in lines[0]
    assert lines[1].startswith("down: vLLM DOWN")
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("c.db*"))  # the WAL file too
    assert b"user:***@127.0.0.1" in stored
    assert not [p for p in PASSWORDS if p.encode() in stored]
    assert not [p for p in PASSWORDS if p in caplog.text or p in "\n".join(lines)]


def test_migration_0013_masks_the_passwords_stored_before(db_url: str) -> None:
    engine = open_engine(db_url)
    Writer(engine).register_target(TargetSettings(name="old"))
    t, m = schema.targets, schema.migrations_table
    with engine.begin() as conn:  # as the writer stored them before it masked the gateway's URL
        conn.execute(t.update().values(
            vllm_url="http://u:vllmpw1@vllm:8000/metrics",
            gateway_source="[litellm] prometheus http://u:gw@pw2@gw:4000/metrics litellm_in_flight_requests",
            gpu_source="dcgm http://u:gpupw3@gpu:9400/metrics",
        ))  # fmt: skip
        conn.execute(schema.sweep_runs.insert().values(started_at=1.0, url="http://u:sweeppw4@vllm:8000/v1", model="m",
                                                       mix="{}", ttft_slo_s=3.0, recommendation="{}"))
        conn.execute(m.delete().where(m.c.name == "0013_masked_urls"))
    assert migrate(engine) == ["0013_masked_urls"]
    with engine.connect() as conn:
        assert conn.execute(select(schema.sweep_runs.c.url)).scalar_one() == "http://u:***@vllm:8000/v1"
    with engine.connect() as conn:
        row = conn.execute(select(t.c.vllm_url, t.c.gateway_source, t.c.gpu_source)).one()
        assert tuple(row) == (
            "http://u:***@vllm:8000/metrics",
            "[litellm] prometheus http://u:***@gw:4000/metrics litellm_in_flight_requests",
            "dcgm http://u:***@gpu:9400/metrics",
        )
    engine.dispose()


def test_a_sweeps_url_is_stored_without_its_password(db_url: str) -> None:
    from db.results import SweepRun
    from db.sweeps import load_sweeps, store_sweep

    engine = open_engine(db_url)
    store_sweep(engine, SweepRun(started_at=1.0, url="http://u:sweeppw4@vllm:8000/v1", model="m", mix="{}",
                                 ttft_slo_s=3.0, levels=(), recommendation={}))
    with engine.connect() as conn:
        assert [r.url for r in load_sweeps(conn, 5)] == ["http://u:***@vllm:8000/v1"]
    engine.dispose()


TOKENS = ("vllmtok1", "gwtok2", "gputok3", "downtok4", "hdrtok5")


def test_no_query_token_is_stored_logged_or_shown(sources, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    server = sources()
    config = tmp_path / "sweetspot.toml"
    config.write_text(f"""
db_url = "sqlite:///{tmp_path}/t.db"
scrape_timeout_s = 2
[[targets]]
name = "up"
vllm_url = "{server.url('/metrics')}?token=vllmtok1"
http.headers = {{ X-Api-Key = "hdrtok5" }}
gateway = {{ kind = "prometheus", url = "{server.url('/gateway')}?API_KEY=gwtok2&x=1", metric = "queue" }}
gpu = {{ source = "dcgm", url = "{server.url('/dcgm')}?access_token=gputok3" }}
[[targets]]
name = "down"
vllm_url = "{closed_port_url()}?sig=downtok4"
""")  # fmt: skip
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SWEETSPOT_")}, "PYTHONPATH": str(ROOT)}

    def app(*argv: str) -> str:
        done = subprocess.run([sys.executable, "-m", "app", "-v", "--config", str(config), *argv], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        return done.stdout + done.stderr

    shown = [app("collect", "--once"), app("status", "--target", "down"), app("status", "--all"), app("config", "--json"),
             app("query", "--format", "json", "SELECT * FROM target_info")]
    assert "up: vLLM up" in shown[0] and "down: vLLM DOWN" in shown[0], shown[0]
    assert "sig=***" in shown[0] and "sig=***" in shown[1]  # the down target's error names its URL
    assert "metrics?token=***" in shown[4] and "gateway?API_KEY=***&x=***" in shown[4]  # as stored
    assert "API_KEY=***&x=***" in shown[3] and "access_token=***" in shown[3]
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("t.db*"))
    assert b"?token=***" in stored and b"?API_KEY=***&x=***" in stored
    assert not [t for t in TOKENS if t.encode() in stored]
    assert not [(t, text) for t in TOKENS for text in shown if t in text]


def test_migration_0014_masks_the_query_tokens_stored_before(db_url: str) -> None:
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="old"))
    writer.close()
    t, m = schema.targets, schema.migrations_table
    error = "cannot reach http://vllm:8000/metrics?token=tok1 (connection refused)"
    with engine.begin() as conn:  # as the writer and the fetcher stored them before
        conn.execute(t.update().values(
            vllm_url="http://vllm:8000/metrics?token=tok1",
            gateway_source="json http://gw:4000/q?apikey=tok2&pretty=1 q",
            discovered_by="http://prom:9090?access_token=tok3",
        ))  # fmt: skip
        target_id = conn.execute(select(t.c.id)).scalar_one()
        conn.execute(schema.scrapes.insert(), [{"target_id": target_id, "ts": 1000 + i, "up": 0, "error": error}
                                               for i in range(3)])
        conn.execute(schema.sweep_runs.insert().values(started_at=1.0, url="http://vllm:8000/v1?key=tok4", model="m",
                                                       mix="{}", ttft_slo_s=3.0, recommendation="{}"))
        conn.execute(m.delete().where(m.c.name == "0014_masked_query_tokens"))
    assert migrate(engine) == ["0014_masked_query_tokens"]
    with engine.connect() as conn:
        assert tuple(conn.execute(select(t.c.vllm_url, t.c.gateway_source, t.c.discovered_by)).one()) == (
            "http://vllm:8000/metrics?token=***", "json http://gw:4000/q?apikey=***&pretty=*** q",
            "http://prom:9090?access_token=***",
        )
        assert set(conn.execute(select(schema.scrapes.c.error)).scalars()) == {
            "cannot reach http://vllm:8000/metrics?token=*** (connection refused)"}
        assert conn.execute(select(schema.sweep_runs.c.url)).scalar_one() == "http://vllm:8000/v1?key=***"
    engine.dispose()


def test_migration_0027_masks_query_values_user_tokens_and_slashed_passwords(db_url: str) -> None:
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="old"))
    writer.close()
    t, m = schema.targets, schema.migrations_table
    link = "http://dash:8501/?target=old&range=6h"
    with engine.begin() as conn:  # as older versions stored them
        conn.execute(t.update().values(vllm_url="https://ghp_tok9@vllm:8000/metrics?page=2",
                                       gateway_source="json http://u:ab/cd==@gw:4000/q q"))
        conn.execute(schema.notifications.insert().values(
            group_key="g", kind="firing", status="queued", recipients="[]", subject="s", body_text=link,
            body_html="", images="{}", alerts="[]", created_at=1, due_at=1, attempts=0))
        conn.execute(m.delete().where(m.c.name == "0027_masked_url_values"))
    assert migrate(engine) == ["0027_masked_url_values"]
    with engine.connect() as conn:
        assert tuple(conn.execute(select(t.c.vllm_url, t.c.gateway_source)).one()) == (
            "https://***@vllm:8000/metrics?page=***", "json http://u:***@gw:4000/q q")
        assert conn.execute(select(schema.notifications.c.body_text)).scalar_one() == link  # a queued e-mail's link works
    engine.dispose()


def test_a_sweeps_error_never_shows_the_urls_password() -> None:
    from core.errors import SweetspotError
    from sweep.client import discover_served

    url = with_user(closed_port_url().removesuffix("/metrics"), "sweeppw5") + "/v1"
    with pytest.raises(SweetspotError) as caught:
        discover_served(url, None, timeout_s=2.0)
    assert "user:***@127.0.0.1" in caught.value.one_line() and "sweeppw5" not in caught.value.one_line()
