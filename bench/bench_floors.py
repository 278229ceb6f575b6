"""How close a collector round is to the least its parts can cost on this machine.

Run: ``.venv/bin/python bench/bench_floors.py [--rounds 100] [--pause-ms 200]``. Against the
simulator in another process (as ``bench/bench_collector.py``), three things run in turn, round after
round, ``--pause-ms`` apart (a live collector sleeps between rounds, so its caches are cold):

- **our round**: ``RoundReader.collect`` of the 3-source demo target (vLLM, gateway, 8 dcgm GPUs)
  and ``Writer.write_round``, as the collector runs them;
- **bare GETs**: the same three pages fetched on three kept-alive plain sockets: one send each, then
  each answer read by its Content-Length and decoded. No pooling, no timeouts, no error handling, no
  parsing: the least three GETs cost;
- **bare transaction**: the rows our writer stored for a round (its ``scrapes``, ``samples`` and
  ``gpu_samples`` rows and its ``series_state``), stored again with the next timestamp through
  Python's ``sqlite3`` alone: BEGIN, the three inserts, the state update, COMMIT. Nothing to compute:
  the least the same rows cost to store;
- **bare GETs, our parsing and writer**: the bare GETs' pages parsed by our collectors
  (``vllm_from_page``, ``gateway_from_page``, ``dcgm_from_page``) and the round written by our
  ``Writer``: our round without our HTTP client and round orchestration.

Prints each one's median and best CPU ms, and the round's ratio to the two floors together. The
differences split what is above the floors: our round minus the fourth line is our HTTP client and
the round's orchestration (``RoundReader.collect_all``); the fourth line minus the two floors is
parsing, the counter and histogram arithmetic, and the writer's own work.
"""

from __future__ import annotations

import argparse
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.commands.run import demo_target  # noqa: E402
from app.jobs import RoundReader  # noqa: E402
from bench.bench_collector import simulated_clock, start_simulator  # noqa: E402
from collectors import dcgm, gateway, vllm  # noqa: E402
from collectors.records import ScrapeRound, SourceResult  # noqa: E402
from core.settings import Settings, TargetSettings  # noqa: E402
from db.engine import open_engine  # noqa: E402
from db.writer import Writer  # noqa: E402

PAGES = ("vllm_metrics", "gateway_metrics", "dcgm_metrics")


class BareGets:
    """Three kept-alive sockets, one per page; a round sends the three requests, then reads each answer."""

    def __init__(self, urls: list[str]) -> None:
        self.sockets: list[socket.socket] = []
        self.requests: list[bytes] = []
        for url in urls:
            parts = urlsplit(url)
            sock = socket.create_connection((parts.hostname, parts.port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sockets.append(sock)
            self.requests.append(f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode())
        self.buffer = bytearray(1 << 20)

    def round(self) -> list[str]:
        for sock, request in zip(self.sockets, self.requests, strict=True):
            sock.send(request)
        return [self._answer(sock) for sock in self.sockets]

    def _answer(self, sock: socket.socket) -> str:
        got, view = 0, memoryview(self.buffer)
        while True:
            got += sock.recv_into(view[got:])
            end = self.buffer.find(b"\r\n\r\n", 0, got)
            if end >= 0:
                head = bytes(self.buffer[:end]).lower()
                length = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
                if got >= end + 4 + length:
                    return bytes(self.buffer[end + 4 : end + 4 + length]).decode()

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


class BareTransaction:
    """The newest round's rows of the database at ``source``, stored again into a copy of it (``path``)
    at each call, with the timestamp 5 s on."""

    def __init__(self, source: str, path: str) -> None:
        with sqlite3.connect(source) as original:
            original.execute("VACUUM INTO ?", (path,))
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")  # as db/engine.py opens it
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.ts = self.db.execute("SELECT max(ts) FROM scrapes").fetchone()[0]
        self.inserts: list[tuple[str, int, list[tuple[object, ...]]]] = []  # (SQL, index of ts, rows)
        for table in ("scrapes", "samples", "gpu_samples"):
            cursor = self.db.execute(f"SELECT * FROM {table} WHERE ts = ?", (self.ts,))  # noqa: S608 (our names)
            columns = [d[0] for d in cursor.description]
            sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
            self.inserts.append((sql, columns.index("ts"), [tuple(row) for row in cursor]))
        self.states = self.db.execute("SELECT model_id, state FROM series_state").fetchall()

    def round(self) -> None:
        self.ts += 5
        ts = self.ts
        cursor = self.db.cursor()
        cursor.execute("BEGIN")
        for sql, at, rows in self.inserts:
            cursor.executemany(sql, [(*row[:at], ts, *row[at + 1 :]) for row in rows])
        for model_id, state in self.states:
            cursor.execute("UPDATE series_state SET ts = ?, state = ? WHERE model_id = ?", (ts, state, model_id))
        cursor.execute("COMMIT")

    def close(self) -> None:
        self.db.close()


def parse_and_write(
    target: TargetSettings, pages: Callable[[], list[str]], writer: Writer, clock: Callable[[], float]
) -> Callable[[], None]:
    """A round of ``target`` from ``pages`` (its vLLM, gateway and dcgm pages), parsed by our
    collectors and written by ``writer``, as ``RoundReader`` would build it (durations aside)."""
    settings = gateway.resolve_preset(target.gateway)
    ok = SourceResult(True, None, 0.001)

    def round_() -> None:
        ts = clock()
        vllm_page, gateway_page, dcgm_page = pages()
        writer.write_round(ScrapeRound(
            target.name, ts,
            vllm.vllm_from_page(target.vllm_url, vllm_page), ok,
            gateway.gateway_from_page(settings, gateway_page), ok,
            dcgm.dcgm_from_page(target.gpu.url, dcgm_page, target.ceiling.bandwidth_gbps), ok,
        ))
    return round_


def cpu_ms_interleaved(steps: dict[str, Callable[[], object]], rounds: int, pause_s: float) -> dict[str, list[float]]:
    """CPU ms of each step, the steps taking turns, ``pause_s`` before each."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            time.sleep(pause_s)
            start = time.process_time()
            step()
            times[name].append((time.process_time() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--pause-ms", type=float, default=200.0, help="sleep before each measured step")
    args = parser.parse_args()
    sim, urls = start_simulator()
    try:
        time.sleep(3)  # let the load fill the engine so the payloads have their full shape
        target = demo_target(urls)
        clock = simulated_clock()  # shared: both ways of writing a round add to the same target
        rounds = RoundReader(Settings(targets=(target,)), clock=clock)
        with tempfile.TemporaryDirectory() as folder:
            path = f"{folder}/floors.db"
            writer = Writer(open_engine(f"sqlite:///{path}"))
            writer.register_target(target)
            for _ in range(5):
                writer.write_round(rounds.collect(target))
            bare_db = BareTransaction(path, f"{folder}/bare.db")
            bare_gets = BareGets([urls[k] for k in PAGES])
            steps: dict[str, Callable[[], object]] = {
                "our round (3 GETs, parse, write)": lambda: writer.write_round(rounds.collect(target)),
                "bare GETs of the 3 pages": bare_gets.round,
                "bare transaction of the same rows": bare_db.round,
                "bare GETs, our parsing and writer": parse_and_write(target, bare_gets.round, writer, clock),
            }
            times = cpu_ms_interleaved(steps, args.rounds, args.pause_ms / 1000)
            bare_gets.close()
            bare_db.close()
            writer.close()
        rounds.close()
    finally:
        sim.terminate()
        sim.wait()
    print(f"{args.rounds} rounds of each, taking turns, {args.pause_ms:g} ms before each (CPU ms of this process):")
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"  {name:36} median {medians[name]:6.3f}   best {min(t):6.3f}")
    ours, bare_gets_ms, bare_db_ms, without_client = medians.values()
    floors = bare_gets_ms + bare_db_ms
    print(f"our round / (bare GETs + bare transaction): {ours / floors:.2f}× ({ours - floors:.3f} ms above the "
          f"two floors together: {ours - without_client:.3f} ms our HTTP client and orchestration, "
          f"{without_client - floors:.3f} ms parsing, arithmetic and the writer's own work)")


if __name__ == "__main__":
    main()
