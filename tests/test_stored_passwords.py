"""No URL's password reaches the database or the log: a round against real servers on 127.0.0.1
with userinfo in every URL, then the bytes of the SQLite file; migration 0013 masks older rows."""

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
    service = CollectionService(Settings(db_url=f"sqlite:///{db}", scrape_timeout_s=2.0, targets=(up, down)))
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
