"""Database size of simulated history with the engine figures (migration 0012_engines).

Prints figures (not a unit test). Run from the repo root, on this branch and on the one before it:

    .venv/bin/python bench/bench_engine_size.py [--hours 6]

One target at 5 s (vLLM page of the simulator, gateway, 8 dcgm GPUs) through the real writer, rolled
up, then VACUUM: the file's bytes. Each run writes the same history (seed 0).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from db.engine import open_engine  # noqa: E402
from db.rollup import rollup  # noqa: E402
from db.writer import Writer  # noqa: E402
from tests import ui_db  # noqa: E402

NOW = 1_764_500_000.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=6.0)
    args = parser.parse_args()
    path = Path(tempfile.mkdtemp(prefix="sweetspot-size-")) / "s.db"
    engine = open_engine(f"sqlite:///{path}")
    writer = Writer(engine)
    writer.register_target(ui_db.target_settings("demo"))
    cpu = time.process_time()
    rounds = writer.write_rounds(ui_db.simulated_rounds("demo", NOW - args.hours * 3600, NOW, 5.0))
    cpu = time.process_time() - cpu
    rollup(engine, NOW)
    engine.dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("VACUUM")
    print(f"{args.hours:g} h, {rounds} rounds: {os.path.getsize(path) / 1e6:.2f} MB after VACUUM; "
          f"history + write {cpu:.1f} s CPU (noisy on a shared machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
