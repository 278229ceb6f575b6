"""Chokepoint (c): bounded work for what a settings file or a source can make the product compute
(core/limits.py states each bound). A generated rule expression that passes the load evaluates to
a bounded number; one that could not is refused at load in one line; configuration epochs are
pruned to their bound; rule validation is linear in the rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simpleeval import InvalidExpression
from sqlalchemy import func, insert, select

from app.alerts.rules import Names, check_rules
from app.loader import load_settings
from core.limits import MAX_EPOCHS_PER_TARGET, MAX_EXPRESSION_CHARS, WORK, expression_problem
from core.settings import ConfigError
from db import schema
from db.engine import open_engine
from db.rollup import prune_epochs

HOSTILE = Path(__file__).resolve().parent / "data" / "hostile" / "settings"
WORK_SAMPLES = ["rule_power_tower.toml", "rule_tuple_repeat.toml", "rule_huge_literal.toml", "rule_long_expression.toml"]

numbers = st.one_of(st.integers(-(10**20), 10**20), st.floats(-1e20, 1e20, allow_nan=False), st.sampled_from(["a", "b"]))


def expressions() -> st.SearchStrategy[str]:
    leaves = numbers.map(str)
    return st.recursive(leaves, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "**", "%", "<", "and"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(inner, st.integers(1, 64)).map(lambda t: f"({t[0]}) * ({t[0]},)" if t[1] > 60 else f"max({t[0]}, {t[1]})"),
        # exponents up to what simpleeval itself allows (4,000,000): 9 ** 3999999 is 3.8 million digits
        st.tuples(inner, st.integers(0, 4_000_000)).map(lambda t: f"({t[0]} ** {t[1]})"),
    ), max_leaves=40)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(text=expressions())
def test_an_expression_that_passes_the_load_evaluates_to_a_bounded_number(text: str) -> None:
    problem = expression_problem(text)
    assert "\n" not in problem
    if problem:
        return
    try:
        value = Names({"a": 3.0, "b": 7}).value(text)
    except (ArithmeticError, TypeError, ValueError, InvalidExpression) as exc:  # a rule in error, never a frozen collector
        assert not isinstance(exc, MemoryError)
        return
    if isinstance(value, int):
        assert value.bit_length() < 2_000_000  # no 10**1000000 built
    assert len(str(value)) < 1_000_000


@pytest.mark.parametrize("sample", WORK_SAMPLES)
def test_each_hostile_rule_is_refused_at_load_in_one_line(sample: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(HOSTILE / sample, {})
    assert "\n" not in str(refused.value) and "cannot be used" in str(refused.value)


def test_a_series_ceiling_past_the_bound_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match=r"max_series: 5e\+06 is out of range; it must be ≥ 1 and ≤ 100000"):
        load_settings(HOSTILE / "series_ceiling.toml", {})


def test_every_bound_is_stated_in_docs_security() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    assert all(name in text for name in WORK), [n for n in WORK if n not in text]


def test_rule_validation_is_linear_in_the_rules(tmp_path: Path) -> None:
    # 4,000 rules of one new name each: the check reads each once (it compared each with all before it)
    lines = [f'[[alerts.rules]]\nname = "r{i}"\nexpr = "queued"\nop = ">"\nthreshold = "{i}"\n' for i in range(4000)]
    path = tmp_path / "many.toml"
    path.write_text("\n".join(lines))
    settings_ = load_settings(path, {})
    calls = 0

    class Counting(list):  # the entries, counting how many times they are walked
        def __iter__(self):  # type: ignore[no-untyped-def]
            nonlocal calls
            calls += 1
            return super().__iter__()

        def __getitem__(self, item):  # type: ignore[no-untyped-def]
            nonlocal calls
            calls += 1
            return super().__getitem__(item)

    object.__setattr__(settings_.alerts, "rules", Counting(settings_.alerts.rules))
    check_rules(settings_, frozenset({"queued"}))
    assert calls <= 2  # one walk of the list, never one a rule


def test_epochs_are_pruned_to_their_bound_and_the_current_one_kept(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path}/e.db")
    e = schema.config_epochs
    with engine.begin() as conn:
        conn.execute(insert(schema.targets), [{"id": 1, "name": "flapping"}, {"id": 2, "name": "quiet"}])
        rows = [{"target_id": 1, "ts": 10_000 + 60 * i, "kind": "restart", "config": "{}", "changes": "[]"}
                for i in range(MAX_EPOCHS_PER_TARGET + 300)]  # a restart a minute
        rows.append({"target_id": 2, "ts": 5, "kind": "first", "config": "{}", "changes": "[]"})  # old, but its current one
        conn.execute(insert(e), rows)
        deleted = prune_epochs(conn, cut=1_000)
        kept = dict(conn.execute(select(e.c.target_id, func.count()).group_by(e.c.target_id)).all())
        newest = conn.execute(select(func.max(e.c.ts)).where(e.c.target_id == 1)).scalar()
    assert kept == {1: MAX_EPOCHS_PER_TARGET, 2: 1} and deleted == 300
    assert newest == 10_000 + 60 * (MAX_EPOCHS_PER_TARGET + 299)


def test_the_expression_bound_is_judged_before_the_parse() -> None:
    assert expression_problem("a + " * MAX_EXPRESSION_CHARS + "1").startswith("longer than")
