"""Rows dated after the clock: moved aside when the clock steps back, so storage resumes at once.

A clock that ran ahead (a wrong NTP source, a VM resumed with a stale offset) and was then set back
leaves a target's rows "from the future". Rows are keyed by time and the writer stores a round only
after the target's latest one, so it skipped every round until the clock passed them again: an
hour ahead, an hour of rounds lost. When the writer meets a round older than the latest stored one
while that latest one is ahead of the clock, it calls :func:`move_future` in the round's
transaction: the target's rows dated at or after the round (raw rows, its rollups, its
configuration epochs, its verdicts) go to ``future_rows`` as JSON (blobs as hex), and the rollup
marks come back to the hour before, so the rollups are folded again from the rows that remain.
Nothing is lost and nothing reads ``future_rows``: it is there to look at (docs/storage.md).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, Table, delete, insert, select, update

from db import schema

# A round this far ahead of the clock is a step, not a round stored twice in one second
# (``collect --once`` run twice) nor a round stamped when it started and written after it ended.
STEP_BACK_S = 2.0


def _json(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes | bytearray | memoryview) else str(value)


def move_future(conn: Connection, target_id: int, target: str, cut: int, now: int) -> int:
    """Move ``target``'s rows dated at or after ``cut`` (unix s) to ``future_rows``; returns how many."""
    models = select(schema.models.c.id).where(schema.models.c.target_id == target_id)
    gpus = select(schema.gpus.c.id).where(schema.gpus.c.target_id == target_id)
    hour = cut // 3600 * 3600  # a rollup period that began before the cut holds rows after it: refolded
    owned: list[tuple[Table, Any, int]] = [
        (schema.scrapes, schema.scrapes.c.target_id == target_id, cut),
        (schema.samples, schema.samples.c.model_id.in_(models), cut),
        (schema.gpu_samples, schema.gpu_samples.c.target_id == target_id, cut),
        (schema.target_rollups, schema.target_rollups.c.target_id == target_id, hour),
        (schema.model_rollups, schema.model_rollups.c.model_id.in_(models), hour),
        (schema.gpu_rollups, schema.gpu_rollups.c.gpu_id.in_(gpus), hour),
        (schema.config_epochs, schema.config_epochs.c.target_id == target_id, cut),
        (schema.verdicts, schema.verdicts.c.target == target, cut // 60 * 60),
    ]
    moved = 0
    for table, mine, since in owned:
        where = (mine, table.c.ts >= since)
        rows = [dict(r) for r in conn.execute(select(table).where(*where)).mappings()]
        if not rows:
            continue
        conn.execute(insert(schema.future_rows), [
            {"moved_at": now, "table_name": table.name, "target": target, "ts": int(r["ts"]),
             "row": json.dumps(r, default=_json)} for r in rows])  # fmt: skip
        conn.execute(delete(table).where(*where))
        moved += len(rows)
    marks = schema.rollup_marks
    conn.execute(update(marks).where(marks.c.until_ts > hour).values(until_ts=hour))
    return moved
