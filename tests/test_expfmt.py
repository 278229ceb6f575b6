"""The selective parser reads exactly what prometheus_client's parser reads, for the wanted names."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from collectors.catalogue import wanted_sample_names
from collectors.expfmt import SelectiveParser, parse
from core.errors import ScrapeError

DATA = Path(__file__).parent / "data"
WANTED = wanted_sample_names()
PARSER = SelectiveParser(WANTED)
# Names near the wanted ones: prefixes, suffixes, and the histogram whose name ends in _total.
DECOYS = [
    "vllm:iteration_tokens_total",
    "vllm:iteration_tokens_total_bucket",
    "vllm:generation_tokens_total_extra",
    "vllm:generation_tokens",
    "vllm:num_requests_running_by_reason",
    "vllm:num_requests_runnin",
    "process_start_time_seconds_x",
    "python_gc_objects_collected_total",
    "http_requests_total",
]
NAMES = sorted(WANTED) + DECOYS


def key(samples):
    return [(n, dict(labels), "nan" if math.isnan(v) else float(v)) for n, labels, v in samples]


def reference(text: str, wanted=WANTED):
    return key(
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name in wanted
    )


# --- generated exposition text -------------------------------------------------------------------

HOSTILE = st.text(alphabet='ab/,={}" \\\n#\t:.-_é⁄\x00', max_size=12)
LABEL_NAMES = st.sampled_from(["model_name", "engine", "le", "finished_reason", "a_b", "_x", "Le2"])
VALUES = st.one_of(
    st.sampled_from(["NaN", "+Inf", "-Inf", "Inf", "nan", "0", "-0", "1e-05", "1.5E+10", "42", "3.14", "1e3", ".5"]),
    st.floats(allow_nan=False).map(repr),
    st.integers(-(10**12), 10**12).map(str),
)


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@st.composite
def sample_line(draw) -> str:
    name = draw(st.sampled_from(NAMES))
    labels = draw(st.dictionaries(LABEL_NAMES, HOSTILE, max_size=4))
    loose = draw(st.booleans())  # blanks around pairs and a trailing comma: the careful path
    pairs = [f'{k}="{escape(v)}"' for k, v in labels.items()]
    block = (" , ".join(pairs) + (" ," if pairs else "")) if loose else ",".join(pairs)
    line = f"{name}{{{block}}}" if (labels or draw(st.booleans())) else name
    line += draw(st.sampled_from([" ", "\t", "  "])) + draw(VALUES)
    if draw(st.booleans()):
        line += draw(st.sampled_from([" ", "\t"])) + str(draw(st.integers(0, 2 * 10**12)))
    return line


@st.composite
def family(draw) -> list[str]:
    lines = []
    name = draw(st.sampled_from(NAMES))
    kind = draw(st.sampled_from(["none", "gauge", "untyped", "histogram", "counter"]))
    if kind == "counter" and not name.endswith("_total"):
        kind = "gauge"  # the reference renames x to x_total under "# TYPE x counter" (see expfmt docstring)
    if draw(st.booleans()):
        lines.append(f"# HELP {name} help with \\\\ and \\n and {{}} = ,")
    if kind != "none":
        lines.append(f"# TYPE {name} {kind}")
    lines += draw(st.lists(sample_line(), max_size=5))  # may be empty: a family with no samples
    return lines


@st.composite
def page(draw) -> str:
    lines = [line for fam in draw(st.lists(family(), max_size=6)) for line in fam]
    extras = draw(st.lists(st.sampled_from(["", "# a comment", "#", "   "]), max_size=3))
    for extra in extras:
        lines.insert(draw(st.integers(0, len(lines))), extra)
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return newline.join(lines) + draw(st.sampled_from(["", newline]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(page())
def test_reads_the_same_samples_as_prometheus_client(text):
    assert key(PARSER.parse(text)) == reference(text)


@settings(max_examples=120, deadline=None)
@given(st.one_of(st.text(max_size=300), page().map(lambda t: t[: len(t) // 2] + "{\"\\" + t[len(t) // 2 :])))
def test_arbitrary_text_raises_only_scrape_error(text):
    try:
        PARSER.parse(text)
    except ScrapeError as exc:
        assert str(exc).startswith("line ")


@settings(max_examples=80, deadline=None)
@given(page(), st.integers(0, 10**6), st.text(max_size=3))
def test_mutated_pages_raise_only_scrape_error(text, where, junk):
    where = where % (len(text) + 1)
    try:
        PARSER.parse(text[:where] + junk + text[where + 1 :])
    except ScrapeError:
        pass


# --- fixtures and hand-written cases --------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["vllm_v1.txt", "vllm_v0.txt", "vllm_v0_10.txt", "vllm_edge_cases.txt"])
def test_fixtures_match_reference(fixture):
    text = (DATA / fixture).read_text()
    ours = key(PARSER.parse(text))
    assert ours == reference(text)
    assert len(ours) > 10


def test_v1_fixture_sample_count_and_keeps_iteration_tokens():
    samples = PARSER.parse((DATA / "vllm_v1.txt").read_text())
    names = {n for n, _, _ in samples}
    assert "vllm:iteration_tokens_total_count" in names  # the engine's steps: the step model's rate
    ttft_buckets = [s for s in samples if s[0] == "vllm:time_to_first_token_seconds_bucket"]
    assert len(ttft_buckets) == 2 * 23


def test_hostile_label_values_and_special_floats():
    text = (
        'vllm:num_requests_running{model_name="a/b,c=d{e}",engine="x\\"y\\\\z\\nw"} 1e3\n'
        "vllm:num_requests_waiting NaN\n"
        'vllm:kv_cache_usage_perc{engine="0"} +Inf 1700000000000\r\n'
        "vllm:gpu_cache_usage_perc -Inf\n"
    )
    samples = parse(text, WANTED)
    assert samples[0][1] == {"model_name": "a/b,c=d{e}", "engine": 'x"y\\z\nw'}
    assert samples[0][2] == 1000.0
    assert math.isnan(samples[1][2])
    assert samples[2][2] == math.inf and samples[3][2] == -math.inf


def test_no_help_type_blank_lines_and_indentation():
    text = "\n\n   vllm:num_requests_running 3\n\n\tvllm:num_requests_waiting{engine=\"1\"} 4\n"
    assert key(parse(text, WANTED)) == [
        ("vllm:num_requests_running", {}, 3.0),
        ("vllm:num_requests_waiting", {"engine": "1"}, 4.0),
    ]


def test_nothing_wanted_reads_nothing():
    assert parse("a 1\nvllm:num_requests_running 2\n", []) == []


def test_family_with_no_samples_and_unwanted_garbage_are_ignored():
    text = "# HELP vllm:num_requests_running x\n# TYPE vllm:num_requests_running gauge\nthis is not { a metric\n"
    assert parse(text, WANTED) == []


@pytest.mark.parametrize(
    "line, reason",
    [
        ("vllm:num_requests_running", "no value"),
        ("vllm:num_requests_running abc", "is not a number"),
        ("vllm:num_requests_running 1_000", "is not a number"),
        ('vllm:num_requests_running{a="1" 2', "not closed"),
        ('vllm:num_requests_running{a=1} 2', "malformed label set"),
        ('vllm:num_requests_running{a="1",a="2"} 2', "appears twice"),
        ('vllm:num_requests_running{__x="1"} 2', "reserved"),
        ("vllm:num_requests_running 1 zz", "is not a number"),
    ],
)
def test_malformed_wanted_lines_raise_scrape_error_with_line_number(line, reason):
    text = f"# HELP x y\nfoo 1\n{line}\n"
    with pytest.raises(ScrapeError, match=rf"^line 3: .*{reason}"):
        PARSER.parse(text)
    with pytest.raises(ValueError):  # the reference refuses the same line
        list(text_string_to_metric_families(text))


@pytest.mark.parametrize("block", [' , a="1", ,b="2" , ', ", ,", "a=\"1\"  ,", 'a="x} 1"'])
def test_lenient_label_blocks_read_like_the_reference(block):
    text = f"vllm:num_requests_running{{{block}}} 7\n"
    assert key(PARSER.parse(text)) == reference(text)


def test_other_name_glued_to_a_wanted_one_is_not_ours():
    text = 'vllm:num_requests_running}{a="1"} 7\nvllm:num_requests_waiting 1\n'
    assert key(PARSER.parse(text)) == reference(text) == [("vllm:num_requests_waiting", {}, 1.0)]


def test_empty_unquoted_label_value_is_refused_unlike_the_reference():
    text = "vllm:num_requests_running{a=} 7\n"
    assert reference(text) == [("vllm:num_requests_running", {}, 7.0)]  # documented difference
    with pytest.raises(ScrapeError, match="malformed label set"):
        PARSER.parse(text)


def test_timestamp_is_read_like_the_reference():
    text = 'vllm:num_requests_running{engine="0"} 5 1700000000000\nvllm:num_requests_waiting 1 2 3\n'
    assert key(PARSER.parse(text)) == reference(text)
