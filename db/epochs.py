"""Configuration epochs: when a target's configuration, as its /metrics page tells it, changed, and when
its process restarted (``config_epochs``, docs/plan.md).

Watched, from each successful vLLM round (:class:`collectors.records.VllmScrape`):

- ``cache_config_info``'s labels :data:`CACHE_KEYS` (gpu_memory_utilization, block_size,
  num_gpu_blocks, cache_dtype, enable_prefix_caching): a label the page lacks is not watched;
- ``models``: the model names served (comma-separated, sorted), and ``engine`` (vllm or sglang);
- ``process_start_time_seconds``: a new value more than :data:`START_SLACK_S` away is a restart.

vLLM's /metrics does not carry its own version (0.32 does not): an upgrade shows as a restart, with
whatever the new version changed among the watched labels.

The writer calls :meth:`EpochTracker.observe` in each round's transaction; the first configuration of
a target is stored as kind ``first``; nothing is stored while nothing changes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, Engine, insert, select, update

from collectors.records import VllmScrape
from db import schema
from db.results import ConfigEpoch

CACHE_KEYS = ("gpu_memory_utilization", "block_size", "num_gpu_blocks", "cache_dtype", "enable_prefix_caching")
START_SLACK_S = 1.0  # process_start_time_seconds is a float of a fixed start; a rounding is not a restart


def config_of(scrape: VllmScrape) -> dict[str, str]:
    """The watched values of one page (``cache_config_info`` labels present, models, engine)."""
    config = {k: str(scrape.cache_config[k]) for k in CACHE_KEYS if k in scrape.cache_config}
    if scrape.models:
        config["models"] = ",".join(sorted(scrape.models))
    config["engine"] = scrape.engine
    return config


def changes_between(before: Mapping[str, str], after: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(key, before, after) for each watched value that differs; a key one side lacks reads ``""``.

    A label that vanished from the page (a scrape that lost cache_config_info) is not a change: only
    values present on the new page are compared, so a partial page never makes an epoch."""
    keys = [k for k in (*CACHE_KEYS, "models", "engine") if k in after]
    return [(k, before.get(k, ""), after[k]) for k in keys if before.get(k, "") != after[k]]


class EpochTracker:
    """Per target, the configuration and process start last stored; read from the database once."""

    def __init__(self, stored: bool = True) -> None:
        self._seen: dict[int, tuple[dict[str, str], float | None] | None] = {}
        self.stored = stored  # False: what was stored before is not this writer's past (db.writer history mode)

    def forget(self) -> None:
        self._seen.clear()

    def observe(self, conn: Connection, target_id: int, ts: int, scrape: VllmScrape) -> ConfigEpoch | None:
        """Store an epoch when ``scrape`` starts one; return it (None: nothing changed)."""
        if target_id not in self._seen:
            self._seen[target_id] = _latest(conn, target_id) if self.stored else None
        config, start = config_of(scrape), scrape.process_start_time_s
        seen = self._seen[target_id]
        if seen is None:
            kind, changes = "first", []
        else:
            before, before_start = seen
            changes = changes_between(before, config)
            config = {**before, **config}  # a value the page stopped showing is kept as it was
            restarted = start is not None and before_start is not None and abs(start - before_start) > START_SLACK_S
            kind = "config+restart" if changes and restarted else "config" if changes else "restart" if restarted else ""
            if not kind:
                if start is not None and before_start is None:
                    self._seen[target_id] = (before, start)  # the start, newly exposed, is no restart
                return None
        conn.execute(insert(schema.config_epochs).values(
            target_id=target_id, ts=ts, kind=kind, config=json.dumps(config, sort_keys=True),
            changes=json.dumps(changes), process_start_s=start))  # fmt: skip
        self._seen[target_id] = (config, start if start is not None else (seen[1] if seen else None))
        return ConfigEpoch("", ts, kind, config, tuple(changes), start)


def _latest(conn: Connection, target_id: int) -> tuple[dict[str, str], float | None] | None:
    e = schema.config_epochs
    row = conn.execute(select(e.c.config, e.c.process_start_s).where(e.c.target_id == target_id)
                       .order_by(e.c.ts.desc()).limit(1)).first()  # fmt: skip
    return None if row is None else (json.loads(row.config), row.process_start_s)


def forget_start(engine: Engine, target: str) -> None:
    """Clear the process start of ``target``'s latest stored epoch, so the next start a writer sees
    is taken up, not read as a restart (:meth:`EpochTracker.observe`: a start newly exposed is none).
    For a past that no process of the target lived (the demo's simulated history, app/history_fill.py):
    the live engine after it is the one that history describes, and the first start showed "since
    restart" before it. Counter arithmetic keeps its own start (``series_state``), untouched here."""
    e, t = schema.config_epochs, schema.targets
    with engine.begin() as conn:
        latest = conn.execute(select(e.c.target_id, e.c.ts).join(t, t.c.id == e.c.target_id).where(t.c.name == target)
                              .order_by(e.c.ts.desc()).limit(1)).first()  # fmt: skip
        if latest is not None:
            conn.execute(update(e).where(e.c.target_id == latest.target_id, e.c.ts == latest.ts)
                         .values(process_start_s=None))


def load_epochs(conn: Connection, target: str, start: float | None = None, end: float | None = None) -> list[ConfigEpoch]:
    """``target``'s epochs starting in [start, end) (all when None), oldest first."""
    e, t = schema.config_epochs, schema.targets
    query: Any = select(e, t.c.name).join(t, t.c.id == e.c.target_id).where(t.c.name == target).order_by(e.c.ts)
    if start is not None:
        query = query.where(e.c.ts >= start)
    if end is not None:
        query = query.where(e.c.ts < end)
    return [
        ConfigEpoch(row.name, float(row.ts), row.kind, json.loads(row.config),
                    tuple(tuple(c) for c in json.loads(row.changes)), row.process_start_s)  # fmt: skip
        for row in conn.execute(query)
    ]
