"""A vLLM that answers /metrics late under load (a busy event loop): each round's increase is divided by
the time between the pages, not between the rounds' starts (issue 30, item 9: tok/s per 5 s swung
0 ↔ 1,600 under a steady 800)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler

from sqlalchemy import select

from app.jobs import RoundReader
from core.settings import Settings, TargetSettings
from db import schema
from db.engine import open_engine
from db.writer import Writer
from tests.support.http_server import serving

RATE = 800.0  # output tokens per second, steady
DELAY_S = 1.0  # every other page waits this long before it is made


def test_a_late_page_does_not_swing_the_rate(tmp_path):
    t0, served = time.time(), [0]
    lock = threading.Lock()

    class Engine(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with lock:
                served[0] += 1
                late = served[0] % 2 == 1
            if late:
                time.sleep(DELAY_S)  # the request waits in the server's queue; the page is made after
            body = ('# TYPE vllm:generation_tokens counter\n'
                    f'vllm:generation_tokens_total{{model_name="m"}} {RATE * (time.time() - t0):.3f}\n').encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    url = f"sqlite:///{tmp_path}/late.db"
    with serving(Engine) as base:
        target = TargetSettings(name="busy", vllm_url=f"{base}/metrics")
        reader, writer = RoundReader(Settings(targets=(target,))), Writer(open_engine(url))
        try:
            writer.register_target(target)
            for _ in range(6):  # each round in a second of its own (rows are keyed by whole seconds)
                second = int(time.time())
                while int(time.time()) == second:
                    time.sleep(0.01)
                writer.write_round(reader.collect(target))
        finally:
            reader.close()
            writer.close()
    s = schema.samples
    with open_engine(url).connect() as conn:
        rows = conn.execute(select(s.c.generation_tokens, s.c.covered_ms).order_by(s.c.ts)).all()
    rates = [tokens / (covered / 1000) for tokens, covered in rows if covered]
    assert len(rates) >= 4
    # the time between the pages, not between the rounds' starts (which reads ~0 then ~2× here)
    assert all(abs(r - RATE) / RATE < 0.1 for r in rates), rates
