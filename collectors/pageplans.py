"""Plans by page shape, and templates that read a page of a known shape without parsing it.

A collector derives from a page's series alone (sample names and label sets, in page order) a
*plan*: which sample feeds which figure. Most scrapes repeat the previous page's series with new
values, so :class:`PagePlans` keeps the plans by shape, and for each page it built a plan from, a
*template*: per line of that page, the text a line of a page of the same shape starts with.

- a wanted sample line: everything before its value (name, label block, the space);
- any other line: ``#`` for a comment, or its metric name and the character after it.

A page whose lines, as many as the template's, each start with the template's text has the
template page's series exactly (a name ends at the first character that cannot be in a name, so
the prefixes fix every line's name and, for wanted lines, its label block). Its values are the
wanted lines' remainders, read as :func:`expfmt.read_values` reads them. One ``str.split`` and two
C-level maps, instead of the selective parser's regular expression over the whole text: 2-3x less
CPU for the simulator's page (docs/benchmarks.md). Any doubt (another line count, a prefix that
differs, a remainder that is not exactly a number) sends the page the selective parser's way, whose
reading the template path must equal (tests/test_pageplans.py checks it on generated page pairs).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from operator import getitem, itemgetter
from typing import Generic, TypeVar

from collectors.expfmt import SelectiveParser, Shape, cached_plan, read_values

P = TypeVar("P")
# What a collector builds a plan from: the page's sample names and labels, in page order.
Build = Callable[[tuple[str, ...], list[Mapping[str, str]]], P]
_NAME_RUN = re.compile(r"[A-Za-z0-9_:]*")  # the name characters of expfmt's pattern


class _Template(Generic[P]):
    __slots__ = ("lines", "prefixes", "pick", "cuts", "plan")

    def __init__(self, prefixes: tuple[str, ...], wanted: Sequence[int], plan: P) -> None:
        self.lines = len(prefixes)
        self.prefixes = prefixes
        # the wanted lines, as a tuple (itemgetter of one index returns the item itself)
        self.pick: Callable[[list[str]], tuple[str, ...]] = (
            itemgetter(*wanted) if len(wanted) > 1 else lambda lines: (lines[wanted[0]],)
        )
        self.cuts = tuple(slice(len(prefixes[i]), None) for i in wanted)
        self.plan = plan


class PagePlans(Generic[P]):
    """One collector's plans by page shape (at most ``size``) and templates (at most ``templates``).

    Shapes are few (one per target and layout); bounds keep endless distinct shapes (a label that
    changes every scrape) from growing memory: plans are cleared when full, templates drop the oldest.
    """

    def __init__(self, parser: SelectiveParser, size: int = 64, templates: int = 16) -> None:
        self.parser = parser
        self.size = size
        self.plans: dict[Shape, P] = {}
        # replaced, never changed in place: a thread reading another target's page iterates safely
        self.templates: tuple[_Template[P], ...] = ()
        self.max_templates = templates

    def clear(self) -> None:
        """Forget every plan and template."""
        self.plans = {}
        self.templates = ()

    def read(self, text: str, build: Build[P]) -> tuple[P, list[float]]:
        """(plan, values) of ``text``: the plan of its shape, built by ``build`` if not known, and its
        wanted samples' values in page order. Raises what the parser and ``build`` raise."""
        known = self._by_template(text)
        if known is not None:
            return known
        names, blocks, labels, values = self.parser.parse_columns(text)
        built: list[P] = []

        def build_once() -> P:
            built.append(build(names, labels))
            return built[0]

        plan = cached_plan(self.plans, names, blocks, build_once, self.size)
        if built and blocks is not None:  # a new shape the fast pass read (blocks None: the careful pass)
            self._learn(text, (names, blocks), plan)
        return plan, values

    def _by_template(self, text: str) -> tuple[P, list[float]] | None:
        if not self.templates or text[-1:] != "\n":
            return None
        lines = text.split("\n")
        count = len(lines)
        for template in self.templates:
            if template.lines == count and all(map(str.startswith, lines, template.prefixes)):
                values = read_values(list(map(getitem, template.pick(lines), template.cuts)))
                return None if values is None else (template.plan, values)
        return None

    def _learn(self, text: str, shape: Shape, plan: P) -> None:
        """Keep the template of a page the fast pass read, unless a line has no safe prefix (blank,
        indented, a bare name, anything but a comment or a sample line)."""
        if not text.endswith("\n"):
            return
        rows = iter(zip(*shape, strict=True))
        prefixes: list[str] = []
        wanted: list[int] = []
        for index, line in enumerate(text.split("\n")[:-1]):
            if line.startswith("#"):
                prefixes.append("#")
                continue
            match = _NAME_RUN.match(line)
            name = match.group() if match else ""
            if not name or len(name) == len(line):
                return
            if name not in self.parser.wanted:
                prefixes.append(line[: len(name) + 1])
                continue
            block, _, value = line[len(name) :].rpartition(" ")
            if next(rows, None) != (name, block):
                return  # not the line the parser read: never expected, but then no template
            prefixes.append(line[: len(line) - len(value)])
            wanted.append(index)
        if wanted and next(rows, None) is None:
            self.templates = (*self.templates, _Template((*prefixes, ""), wanted, plan))[-self.max_templates :]
