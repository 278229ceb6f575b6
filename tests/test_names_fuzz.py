"""Chokepoint (d): one name type (core/text.py) for configured and discovered target names, saved
queries, rule names, label values and URL hosts. Generated look-alikes of generated names are
refused (or read as the very name they copy, which is then refused as taken), never accepted
beside it; the hostile samples of that kind are each refused in one line."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.loader import load_settings
from core.errors import QueryError
from core.limits import url_problem
from core.settings import ConfigError
from core.text import NameClaims, name_problem, name_skeleton, same_name_problem
from db import saved_queries
from db.engine import open_engine

HOSTILE = Path(__file__).resolve().parent / "data" / "hostile" / "settings"
NAME_SAMPLES = ["name_fullwidth.toml", "name_armenian_lookalike.toml", "name_accented_duplicate.toml",
                "host_cyrillic_letter.toml", "label_value_joiner.toml", "rule_name_stacked_marks.toml"]  # fmt: skip

# What a copy of a name can be made of: letters drawn alike in other scripts, characters that read
# as nothing, marks, compatibility forms
LOOKALIKE = {"a": "аɑ", "c": "сϲ", "e": "е", "i": "іıɩ", "o": "оοօ", "p": "рρ", "s": "ѕ", "x": "х", "y": "уʏ",
             "h": "һհ", "j": "јȷ", "u": "ս", "g": "ɡց", "n": "ո", "v": "ν", "w": "ԝ"}  # fmt: skip
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e", "\u2066", "\u180e", "\U000e0041"]
MARKS = ["\u0301", "\u0300", "\u0338", "\u0307", "\u0323"]

base_names = st.from_regex(r"[a-z][a-z0-9-]{0,24}", fullmatch=True)


@st.composite
def disguised(draw: st.DrawFn) -> tuple[str, str]:
    name = draw(base_names)
    at = draw(st.integers(0, len(name)))
    how = draw(st.sampled_from(["lookalike", "invisible", "mark", "fullwidth", "composed"]))
    if how == "lookalike":
        swappable = [i for i, c in enumerate(name) if c in LOOKALIKE]
        if not swappable:
            how = "invisible"
        else:
            i = draw(st.sampled_from(swappable))
            copy = name[:i] + draw(st.sampled_from(LOOKALIKE[name[i]])) + name[i + 1 :]
    if how == "invisible":
        copy = name[:at] + draw(st.sampled_from(INVISIBLE)) + name[at:]
    elif how == "mark":
        copy = name[:at] + draw(st.sampled_from(MARKS)) * draw(st.integers(1, 4)) + name[at:]
    elif how == "fullwidth":
        copy = "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in name)
    elif how == "composed":  # a letter with its mark, written as one character: normal form, reads alike
        copy = unicodedata.normalize("NFC", name[:at] + "\u0301" + name[at:]) if at else name + "\u0301"
        copy = unicodedata.normalize("NFC", copy)
    return name, copy


@settings(max_examples=400, deadline=None)
@given(pair=disguised())
def test_a_lookalike_of_any_name_is_never_accepted_beside_it(pair: tuple[str, str]) -> None:
    name, copy = pair
    assert name_problem(name) == ""
    if copy == name:
        return
    claims = NameClaims([name])  # the name configured; the copy discovered by a source
    refused = name_problem(copy) or claims.claim(copy, "prometheus 'p'") or same_name_problem(copy, [name])
    assert refused, (name, copy)
    assert "\n" not in refused and not any(unicodedata.category(c) == "Cc" for c in refused)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=60))
def test_any_text_is_judged_in_one_line_and_its_skeleton_is_stable(text: str) -> None:
    problem = name_problem(text)
    assert "\n" not in problem and not any(unicodedata.category(c) in ("Cc", "Cf") for c in problem)
    skeleton = name_skeleton(text)
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Mn", "Me") for c in skeleton)
    if not problem:  # a name that passes is its own normal form and reads as its skeleton's twin
        assert unicodedata.normalize("NFKC", text) == text


hosts = st.from_regex(r"[a-z][a-z0-9-]{0,12}(\.[a-z][a-z0-9-]{0,12}){0,2}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(host=hosts, at=st.integers(0, 40), letter=st.sampled_from("аеорсхуіѕօսɑɡᴠ\u00e9ñü\u200b"))
def test_a_url_host_with_any_letter_that_is_not_ascii_is_refused(host: str, at: int, letter: str) -> None:
    assert url_problem(f"http://{host}:8000/metrics") == ""
    spoof = host[: at % (len(host) + 1)] + letter + host[at % (len(host) + 1) :]
    problem = url_problem(f"http://{spoof}:8000/metrics")
    assert problem and "\n" not in problem


@pytest.mark.parametrize("sample", NAME_SAMPLES)
def test_each_hostile_name_sample_is_refused_at_load_in_one_line(sample: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(HOSTILE / sample, {})
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("copy", ["tоp-models", "top\u200b-models", "ｔｏｐ-models", "tóp-models"])
def test_a_saved_query_named_like_another_is_refused(tmp_path: Path, copy: str) -> None:
    url = f"sqlite:///{tmp_path}/q.db"
    open_engine(url).dispose()  # made and migrated
    saved_queries.save(url, "top-models", "SELECT 1", now=1)
    with pytest.raises(QueryError, match="cannot save the query"):
        saved_queries.save(url, copy, "SELECT 2", now=2)
    saved_queries.save(url, "top-models", "SELECT 3", now=3)  # the same name replaces its query
    assert [(q.name, q.sql) for q in saved_queries.list_saved(url)] == [("top-models", "SELECT 3")]
