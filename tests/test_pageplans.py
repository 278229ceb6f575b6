"""A page read by a template reads exactly what the selective parser reads, or is parsed by it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.errors import ScrapeError
from collectors.expfmt import SelectiveParser
from collectors.pageplans import PagePlans
from tests.test_expfmt import NAMES, PARSER, VALUES, WANTED, escape, key

LABELS = st.dictionaries(st.sampled_from(["model_name", "engine", "le", "a_b"]), st.text("ab/,={}\" \\\n#é", max_size=6),
                         max_size=3)
# What a value token may turn into on the next page: numbers, and what must send it the parser's way.
NEXT_VALUES = st.one_of(VALUES, st.text(alphabet=" \t_#{}\"1e.-+xN\r\x0b", max_size=6))


def build(names, labels):
    return list(zip(names, labels, strict=True))


def read(pages: PagePlans, text: str):
    """The samples as PagePlans reads them (plan: names and labels; values), or the error's text."""
    try:
        plan, values = pages.read(text, build)
    except ScrapeError as exc:
        return str(exc)
    return key((name, labels, value) for (name, labels), value in zip(plan, values, strict=True))


def parsed(text: str, parser: SelectiveParser = PARSER):
    try:
        return key(parser.parse(text))
    except ScrapeError as exc:
        return str(exc)


@st.composite
def canonical_page(draw) -> list[str]:
    """A page the fast pass reads, as exporters write it: HELP/TYPE lines, then samples."""
    lines = []
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5)):
        lines += [f"# HELP {name} help", f"# TYPE {name} gauge"]
        for labels in draw(st.lists(LABELS, min_size=1, max_size=3)):
            block = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
            lines.append(f"{name}{{{block}}} {draw(VALUES)}" if block or draw(st.booleans()) else f"{name} {draw(VALUES)}")
    return lines


@st.composite
def next_page(draw, lines: list[str]) -> list[str]:
    """The next scrape of ``lines``: new values, and sometimes a line changed, added or dropped."""
    values = VALUES if draw(st.booleans()) else NEXT_VALUES  # numbers only: the template reads the page
    out = [line if line.startswith("#") else f"{line.rpartition(' ')[0]} {draw(values)}" for line in lines]
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(out) - 1))
        change = draw(st.sampled_from(["append", "replace", "insert", "drop", "indent", "rename"]))
        junk = draw(st.sampled_from(["", " ", "\t5", " 1 2", "}", "_1", *NAMES[:3], f"{NAMES[0]} 3", "# x"]))
        if change == "append":
            out[at] += junk
        elif change == "replace":
            out[at] = junk
        elif change == "insert":
            out.insert(at, junk)
        elif change == "drop":
            del out[at]
        elif change == "indent":
            out[at] = " " + out[at]
        elif not out[at].startswith("#"):  # another name, wanted or not, often sharing a prefix with this one
            out[at] = draw(st.sampled_from(NAMES)) + out[at][len(out[at].partition(" ")[0].partition("{")[0]) :]
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_template_reads_what_the_parser_reads(data):
    first = data.draw(canonical_page())
    second = data.draw(next_page(first))
    pages: PagePlans = PagePlans(PARSER)
    first_text, second_text = "\n".join(first) + "\n", "\n".join(second) + data.draw(st.sampled_from(["\n", ""]))
    assert read(pages, first_text) == parsed(first_text)
    if any(line.partition(" ")[0].partition("{")[0] in WANTED for line in first):
        assert len(pages.templates) == 1  # every canonical page with a wanted sample gets a template
    assert read(pages, second_text) == parsed(second_text)


def test_a_page_of_the_same_shape_is_read_by_its_template():
    pages: PagePlans = PagePlans(PARSER)
    first = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 1\nhttp_x{a="1"} 2\n'
    plan, _ = pages.read(first, build)
    pages.plans.clear()  # a page read by the template never reaches the plans
    again, values = pages.read(first.replace("1\n", "1.5\n").replace("2\n", "junk\n"), build)
    assert again is plan and values == [1.5] and pages.plans == {}


FIRST = '# TYPE x gauge\nvllm:num_requests_running{engine="0"} 1\nhttp_x 2\n'


@pytest.mark.parametrize(
    ("find", "put"),
    [
        ("1\n", "1 1700000000\n"),  # a timestamp appears
        ("1\n", "1_0\n"),  # "_": float() takes it, the reference does not
        ('"0"', '"1"'),  # another label set
        ("http_x", "vllm:num_requests_waiting"),  # a wanted line where another was
        ("http_x", " vllm:num_requests_waiting"),  # ...indented
        ("http_x", "http_x_total"),  # a wanted name where a shorter one was
        ("# TYPE x gauge", "vllm:num_requests_waiting 3"),  # a wanted line where a comment was
        ("2\n", "2"),  # no final newline
        ("2\n", "2\nvllm:num_requests_waiting 3"),  # ...after a wanted line, where the template expects ""
        ("2\n", "2\n\n"),  # one line more
    ],
)
def test_any_doubt_sends_the_page_to_the_parser(find, put):
    pages: PagePlans = PagePlans(SelectiveParser(["vllm:num_requests_running", "vllm:num_requests_waiting", "http_x_total"]))
    pages.read(FIRST, build)
    assert len(pages.templates) == 1
    second = FIRST.replace(find, put)
    assert second != FIRST
    assert pages._by_template(second) is None  # the template does not read it...
    assert read(pages, second) == parsed(second, pages.parser)  # ...the parser does


@pytest.mark.parametrize(
    "page",
    [
        "vllm:num_requests_running 1\n\nhttp_x 2\n",  # a blank line: a prefix "" would match anything
        "vllm:num_requests_running 1\n  http_x 2\n",  # an indented line
        "vllm:num_requests_running 1\nhttp_x\n",  # a bare name
        "vllm:num_requests_running 1\n{x} 2\n",  # not a comment, not a sample
        "vllm:num_requests_running 1",  # no final newline
        "vllm:num_requests_running 1\nhttp_x 2",  # ...after a line not wanted
        "vllm:num_requests_running 1 2\n",  # the careful pass read it
        "http_x 1\n",  # nothing wanted
    ],
)
def test_pages_without_safe_prefixes_get_no_template(page):
    pages: PagePlans = PagePlans(PARSER)
    pages.read(page, build)
    assert pages.templates == ()


def test_templates_are_bounded_oldest_dropped():
    pages: PagePlans = PagePlans(PARSER, templates=3)
    for n in range(5):
        pages.read(f'vllm:num_requests_running{{engine="{n}"}} 1\n', build)
    assert [t.prefixes[0] for t in pages.templates] == [f'vllm:num_requests_running{{engine="{n}"}} ' for n in (2, 3, 4)]
