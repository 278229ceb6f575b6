"""Every sample of tests/data/hostile/ through the entry point of its kind, in one test: settings
files through ``config``, benchmark files through ``bench import`` (then ``bench list`` and the
Operating point text), pages through ``inspect``. Each is read or refused in one line naming what
was refused (never a traceback, never the error boundary's catch-all), and a refused one stores
nothing. A new hostile sample is one file in that directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select

from app.cli import main
from db import schema

HOSTILE = Path(__file__).resolve().parent / "data" / "hostile"
ENTRY = {"settings": lambda f: ["--config", str(f), "config"],
         "bench": lambda f: ["bench", "import", str(f), "--target", "prod"],
         "pages": lambda f: ["inspect", str(f)]}  # fmt: skip
SAMPLES = sorted((kind, f) for kind in ENTRY for f in (HOSTILE / kind).iterdir())
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_the_directory_holds_samples_of_every_kind():
    assert {kind for kind, _ in SAMPLES} == set(ENTRY) and len(SAMPLES) >= 25


@pytest.mark.parametrize(("kind", "sample"), SAMPLES, ids=[f"{k}/{f.name}" for k, f in SAMPLES])
def test_a_hostile_sample_is_read_or_refused_in_one_line(kind, sample, tmp_path, monkeypatch, capsys):
    config = tmp_path / "s.toml"
    config.write_text('[[targets]]\nname = "prod"\nvllm_url = "http://127.0.0.1:8000/metrics"\n')
    db = tmp_path / "s.db"
    monkeypatch.setenv("SWEETSPOT_DB_URL", f"sqlite:///{db}")
    monkeypatch.setenv("SWEETSPOT_CONFIG", str(config))
    rc = main(ENTRY[kind](sample))
    out, err = capsys.readouterr()
    assert rc in (0, 2) and "Traceback" not in err and "stopped on what it could not handle" not in err, err
    assert not CONTROL.search(out) and not CONTROL.search(err)
    if rc == 2:
        assert err.startswith("ERROR: ") and err.count("\n") == 1, err
        if kind == "bench" and db.exists():
            with create_engine(f"sqlite:///{db}").connect() as conn:
                assert conn.execute(select(func.count()).select_from(schema.bench_runs)).scalar() == 0
    elif kind == "bench":  # stored: then listed, and drawn into the page's text, without error
        assert main(["bench", "list"]) == 0 and main(["bench", "list", "--json"]) == 0
        from app.operating_point import bench_text
        from db.benches import load_benches

        with create_engine(f"sqlite:///{db}").connect() as conn:
            assert bench_text(load_benches(conn))


def test_a_stored_run_no_calendar_holds_cannot_break_the_list_or_the_page(tmp_path, monkeypatch, capsys):
    """A row an older version stored (year 10,000, settings that are not an object) is read as untrusted."""
    monkeypatch.setenv("SWEETSPOT_DB_URL", f"sqlite:///{tmp_path}/s.db")
    config = tmp_path / "s.toml"
    config.write_text('[[targets]]\nname = "prod"\nvllm_url = "http://127.0.0.1:8000/metrics"\n')
    monkeypatch.setenv("SWEETSPOT_CONFIG", str(config))
    assert main(["bench", "import", str(Path(__file__).parent / "data" / "bench" / "vllm_bench_serve_c8.json")]) == 0
    engine = create_engine(f"sqlite:///{tmp_path}/s.db")
    with engine.begin() as conn:
        conn.execute(schema.bench_runs.update().values(run_at=1e300, settings="[1, 2"))
    capsys.readouterr()
    assert main(["bench", "list"]) == 0
    assert "an impossible time (1e+300 s)" in capsys.readouterr().out
    from app.operating_point import bench_text
    from db.benches import load_benches

    with engine.connect() as conn:
        assert "an impossible time" in bench_text(load_benches(conn))
