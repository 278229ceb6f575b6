"""The engines table (core/engines.py) is the one list: every engine the settings accept, the
simulator speaks, the collector detects and the catalogue names, with its words and versions."""

from __future__ import annotations

import pytest

from collectors.catalogue import CATALOGUE
from collectors.vllm import parse_vllm
from core.engines import DEFAULT, ENGINES, engine_named, name_versions, preemption_word
from core.settings import ConfigError, read_settings
from simulator.expo import LAYOUTS, VllmView, render, vllm_families
from simulator.stats import EngineStats


def _page(engine: str) -> str:
    stats = EngineStats(started_at=1.7e9, generation_tokens=100.0, prompt_tokens=50.0)
    return render(vllm_families(VllmView("m", stats, 3, 1, 0.25, 4980, 16, 0.92, engine=engine)))


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_the_simulators_page_of_each_engine_is_detected_as_that_engine(engine) -> None:
    assert set(LAYOUTS) == {e.name for e in ENGINES}
    scrape = parse_vllm(_page(engine.name))
    assert scrape.engine == engine.name
    assert scrape.metric_names_used and all(engine.owns(n) for n in scrape.metric_names_used.values())


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.name)
def test_each_engine_is_a_setting_and_its_names_are_in_the_catalogue(engine, tmp_path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(f'[[targets]]\nname = "t"\nvllm_url = "http://h.test:8000/metrics"\nengine = "{engine.name}"\n')
    assert read_settings(path).targets[0].engine == engine.name
    assert any(engine.owns(n) for spec in CATALOGUE for n in spec.names)
    assert all(name_versions(n) == v for n, v in engine.versions.items()) and all(engine.owns(n) for n in engine.versions)


def test_an_engine_not_in_the_table_is_refused_naming_them_all(tmp_path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[[targets]]\nname = "t"\nvllm_url = "http://h.test:8000/metrics"\nengine = "tgi"\n')
    with pytest.raises(ConfigError, match=f"targets\\[0\\].engine: 'tgi' is not one of auto, {', '.join(e.name for e in ENGINES)}"):
        read_settings(path)


def test_words_and_names_of_an_unknown_engine_are_the_defaults() -> None:
    assert engine_named(None) is None and engine_named("auto") is None
    assert preemption_word(None) == DEFAULT.preemption == "preemptions" and preemption_word("sglang") == "retractions"
    assert name_versions("process_start_time_seconds") == DEFAULT.stable
