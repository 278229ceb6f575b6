import pytest

from app.loader import load_settings
from core.durations import DurationError, format_duration, parse_duration
from core.settings import CeilingSettings, ConfigError, HttpSettings, PrometheusSettings, require_scrape_tokens


def write(tmp_path, text):
    path = tmp_path / "sweetspot.toml"
    path.write_text(text)
    return path


def test_defaults_reproduce_the_reference_ceiling_inputs():
    settings = load_settings(None, {})
    assert settings.db_url == "sqlite:///data/sweetspot.db"
    assert settings.interval_s == 5.0
    assert settings.sweetspot.concurrency is None  # unknown unless configured (app/sweet_spot.py finds one)
    assert settings.sweetspot.ttft_p95_slo_s == 3.0


def test_no_ceiling_inputs_unless_given_and_the_demo_gives_the_reference():
    from app.commands.run import demo_target

    settings = load_settings(None, {})
    assert CeilingSettings() == CeilingSettings(None, None, None, None) and not CeilingSettings().has_inputs
    assert settings.prometheus == () and PrometheusSettings().ceiling == CeilingSettings()
    demo = demo_target({"vllm_metrics": "http://127.0.0.1:1/metrics", "gateway_metrics": "http://127.0.0.1:2/metrics",
                        "dcgm_metrics": "http://127.0.0.1:3/metrics"})  # fmt: skip
    # configured explicitly: TP 8 at 900 GB/s; no weights typed: the collector reads them from the served
    # model's shape (Llama-3-70B AWQ g128 by the simulator's name): 37.67 GB a step, a 70B Llama's KV a token
    assert demo.ceiling == CeilingSettings(None, 8, 900.0) and demo.max_num_seqs == 32
    from app.model_shapes import shaped

    filled, shape = shaped(demo, "sweetspot/sim-70b-awq", "")
    assert shape is not None and shape.source == "table of known architectures (Llama 3 70B AWQ (4-bit, group 128))"
    assert filled.ceiling.weight_gb == pytest.approx(37.666, abs=0.001) and filled.ceiling.has_inputs
    assert filled.ceiling.kv_bytes_per_token == 327_680 and filled.ceiling.active_params_b == pytest.approx(70.55, abs=0.01)


def test_file_then_environment_then_overrides(tmp_path):
    path = write(tmp_path, 'db_url = "sqlite:///file.db"\ninterval_s = "10s"\n[[targets]]\nname = "a"\nvllm_url = "http://127.0.0.1:1/metrics"\n')
    assert load_settings(path, {}).db_url == "sqlite:///file.db"
    env = {"SWEETSPOT_DB_URL": "sqlite:///env.db"}
    assert load_settings(path, env).db_url == "sqlite:///env.db"
    assert load_settings(path, env, {"db_url": "sqlite:///flag.db"}).db_url == "sqlite:///flag.db"
    assert load_settings(path, {}).interval_s == 10.0
    assert load_settings(None, {"SWEETSPOT_CONFIG": str(path)}).targets[0].name == "a"


def test_target_tables_and_presets(tmp_path):
    path = write(
        tmp_path,
        '[[targets]]\nname = "p"\nvllm_url = "http://127.0.0.1:1/metrics"\n'
        'gateway = { preset = "litellm", url = "http://127.0.0.1:2/metrics" }\n'
        'gpu = { source = "dcgm", url = "http://127.0.0.1:3/metrics" }\n'
        'ceiling = { weight_gb = 140, tensor_parallel = 4, bandwidth_gbps = 2039 }\n',
    )
    target = load_settings(path, {}).targets[0]
    assert target.gateway.kind == "prometheus"
    assert target.gateway.metric == "litellm_in_flight_requests"
    assert target.ceiling.tensor_parallel == 4
    assert target.ceiling.bandwidth_gbps == 2039.0


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("intervl_s = 5\n", "intervl_s"),
        ('interval_s = "fast"\n', "interval_s"),
        ("[[targets]]\nname = 3\n", "targets[0].name"),
        ('[[targets]]\ngpu = { source = "nvm" }\n', "targets[0].gpu.source"),
        ('[[targets]]\ngpu = { source = "dcgm" }\n', "targets[0].gpu.url"),
        ('[[targets]]\ngateway = { preset = "nginx", url = "http://x" }\n', "targets[0].gateway.preset"),
        ('[[targets]]\nname = "a"\n[[targets]]\nname = "a"\n', "targets"),
        ('ui_password = "x"\n', "ui_password"),
        ("[sweetspot]\nconcurrency = 1.5\n", "sweetspot.concurrency"),
        ("this is = not toml =\n", "not valid TOML"),
    ],
)
def test_invalid_config_names_the_key(tmp_path, text, key):
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, text), {})
    assert key in str(info.value)


def test_missing_file_names_the_fix(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(tmp_path / "absent.toml", {})


def test_secrets_only_from_environment():
    settings = load_settings(None, {"SWEETSPOT_UI_PASSWORD": "pw", "SWEETSPOT_SMTP_PASSWORD": "s"})
    assert settings.ui_password == "pw"
    assert settings.smtp_password == "s"


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("5m", 300), ("2h", 7200), ("7d", 604800), ("1.5", 1.5), (30, 30)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5 minutes", "-3s", "m5", "5y"])
def test_bad_durations(text):
    with pytest.raises(DurationError):
        parse_duration(text)


def test_format_duration_round_trips():
    for seconds in (5, 300, 3600, 86400 * 7, 90):
        assert parse_duration(format_duration(seconds)) == seconds


HTTP_CONFIG = """
[[targets]]
name = "t"
vllm_url = "https://vllm.test/metrics"
http = { headers = { X-Org = "a", X-Both = "target" }, bearer_token_env = "T_TOKEN", ca_file = "/ca.pem" }
gateway = { kind = "prometheus", url = "http://gw.test/metrics", metric = "q", http = { headers = { X-Both = "gateway" }, proxy = "http://proxy.test:3128" } }
gpu = { source = "dcgm", url = "http://dcgm.test/metrics", http = { tls_verify = false, bearer_token_env = "G_TOKEN" } }
"""


def test_http_settings_per_target_and_per_source(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(HTTP_CONFIG)
    target = load_settings(path, {"T_TOKEN": "tok-t", "G_TOKEN": "tok-g"}).targets[0]
    vllm, gateway, gpu = (target.source_http(s) for s in ("vllm", "gateway", "gpu"))
    assert vllm.headers == {"X-Org": "a", "X-Both": "target"} and vllm.bearer_token == "tok-t" and vllm.tls_verify
    assert gateway.headers == {"X-Org": "a", "X-Both": "gateway"} and gateway.proxy == "http://proxy.test:3128"
    assert gateway.bearer_token == "tok-t" and gateway.ca_file == "/ca.pem"
    assert gpu.bearer_token == "tok-g" and gpu.tls_verify is False and gpu.ca_file == "/ca.pem"


def test_a_bearer_token_comes_from_its_variable_only(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(HTTP_CONFIG)
    settings = load_settings(path, {"T_TOKEN": "tok-t"})  # reading needs no token: only scraping does
    assert settings.targets[0].source_http("gpu").bearer_token == ""
    with pytest.raises(ConfigError, match=r"targets\[0\]\.gpu\.http\.bearer_token_env: the environment variable G_TOKEN is not set"):
        require_scrape_tokens(settings)
    path.write_text('[[targets]]\nname = "t"\nvllm_url = "http://v.test/metrics"\nhttp = { bearer_token = "x" }\n')
    with pytest.raises(ConfigError, match=r"targets\[0\]\.http\.bearer_token: secrets are read from the environment only"):
        load_settings(path, {})


def test_a_source_can_set_back_a_default_its_target_changed(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("""
[[targets]]
name = "t"
vllm_url = "https://vllm.test/metrics"
http = { tls_verify = false, ca_file = "/target-ca.pem", bearer_token_env = "T_TOKEN", proxy = "http://proxy.test:3128" }
gateway = { kind = "prometheus", url = "https://gw.test/metrics", metric = "q", http = { tls_verify = true, ca_file = "" } }
gpu = { source = "dcgm", url = "https://dcgm.test/metrics", http = { bearer_token_env = "", proxy = "" } }
""")
    target = load_settings(path, {"T_TOKEN": "tok-t"}).targets[0]
    gateway, gpu = target.source_http("gateway"), target.source_http("gpu")
    assert gateway.tls_verify is True and gateway.ca_file == ""  # given at the source: they win, defaults or not
    assert gateway.bearer_token == "tok-t" and gateway.proxy == "http://proxy.test:3128"  # not given: the target's
    assert gpu.bearer_token == "" and gpu.bearer_token_env == "" and gpu.proxy == ""
    assert gpu.tls_verify is False and gpu.ca_file == "/target-ca.pem"
    assert HttpSettings(tls_verify=False).over(HttpSettings(ca_file="/x")).ca_file == "/x"  # built in code
