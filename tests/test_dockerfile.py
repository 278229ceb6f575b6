"""The image cannot be built here (no Docker engine), so check what can go stale without one."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def copied_sources() -> set[str]:
    return {line.split()[1] for line in DOCKERFILE.splitlines() if line.startswith("COPY ")}


def test_every_copied_path_exists():
    for source in copied_sources():
        assert (ROOT / source).exists(), f"Dockerfile copies {source}, which does not exist"


def test_every_runtime_package_is_in_the_image():
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists() and p.name not in ("tests", "bench")}
    missing = packages - copied_sources()
    assert not missing, f"Dockerfile does not COPY {sorted(missing)}: the image would fail to import them"


def test_image_runs_as_non_root_with_a_data_volume_and_the_container_settings():
    assert "\nUSER sweetspot" in DOCKERFILE and 'VOLUME ["/data"]' in DOCKERFILE
    assert 'ENTRYPOINT ["python", "-m", "app"]' in DOCKERFILE
    settings = (ROOT / "deploy" / "container.toml").read_text()
    assert 'db_url = "sqlite:////data/sweetspot.db"' in settings and 'address = "0.0.0.0"' in settings


def test_container_settings_load():
    from app.loader import load_settings

    settings = load_settings(ROOT / "deploy" / "container.toml", {})
    assert settings.ui.address == "0.0.0.0" and settings.db_url.endswith("/data/sweetspot.db")


def test_each_source_is_copied_once_and_the_docs_the_messages_cite_are_in():
    lines = [line.split()[1] for line in DOCKERFILE.splitlines() if line.startswith("COPY ")]
    assert len(lines) == len(set(lines)), f"copied twice: {sorted({s for s in lines if lines.count(s) > 1})}"
    assert "docs" in lines  # "see docs/alerts.md" in a message of the image must name a file it has
