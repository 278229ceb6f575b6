"""A fast, selective parser of the Prometheus text exposition format (version 0.0.4).

Only samples whose names are asked for are read; every other line is skipped inside one compiled
regular expression, with no Python-level work, which is what makes a 58 KB vLLM page cost well under
a millisecond (bench/bench_parse.py). ``prometheus_client.parser`` is the reference: for the names
asked for, this module reads the same (name, labels, value) samples (tests/test_expfmt.py checks it
differentially on generated text). Deliberate differences, all on lines the reference reads:

- the exposed sample name is kept as is; the reference renames ``x`` to ``x_total`` when a
  ``# TYPE x counter`` line announces it (a Prometheus server stores ``x``);
- the quoted UTF-8 name syntax (``{"metric.name", a="b"}``) is not read: such lines are skipped;
- timestamps are checked but dropped (vLLM never sends them);
- HELP/TYPE lines are not read at all, so a malformed one is not an error here;
- a label term with an empty unquoted value (``{a=}``) is refused; the reference skips it.

Bounds (docs/security.md), applied to the raw lines before any label or value is read, each costing
only the lines over it (counted, never the page): a wanted line longer than :data:`MAX_LINE_CHARS`,
a label value longer than :data:`MAX_LABEL_VALUE_CHARS`, and the buckets of one histogram series
past :data:`MAX_BUCKETS` (a ``+Inf`` that is cut off leaves that histogram incomplete, as a missing
one would).

A malformed line of a wanted name raises :class:`~core.errors.ScrapeError` naming the line number; no
other exception type escapes. Lines of names not asked for are never looked at, so garbage there is
ignored (the caller decides whether "nothing found" is an error).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress, islice
from operator import itemgetter, methodcaller
from types import MappingProxyType
from typing import NamedTuple, cast

from core.errors import ScrapeError

# (sample name, labels, value). Labels are read-only and shared between samples and pages.
Sample = tuple[str, Mapping[str, str], float]
Columns = tuple[tuple[str, ...], list[Mapping[str, str]], list[float]]  # names, labels, values


class Page(NamedTuple):
    """A page's wanted samples as columns, one entry per sample in page order."""

    names: tuple[str, ...]
    # The raw label blocks ("{a=\"b\"}" or ""), of which labels are a function; None when the page
    # took the careful pass. (names, blocks) names the page's series: a key for what depends on them.
    blocks: tuple[str, ...] | None
    labels: list[Mapping[str, str]]
    values: list[float]
    dropped: int  # series left out by parse_limited's max_series
    refused: int = 0  # lines over the line, label-value or bucket bounds (MAX_LINE_CHARS ...)


_NAME_CHARS = "A-Za-z0-9_:"
_LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_PAIR = rf'{_LABEL_NAME}="(?:[^"\\\n]|\\.)*"'
# The canonical label block every client library writes: name="value" pairs, single commas.
_STRICT_LABELS_RE = re.compile(rf"(?:{_PAIR}(?:,{_PAIR})*,?)?")
_PAIRS_RE = re.compile(rf'({_LABEL_NAME})="((?:[^"\\\n]|\\.)*)"')
_ESCAPE_RE = re.compile(r'\\[\\n"]')
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_NAME, _LABELS, _VALUE = itemgetter(0), itemgetter(1), itemgetter(2)
_REST = methodcaller("group", 2, 3, 4)  # of a hit: the line after its name (with its space)
_EMPTY: Mapping[str, str] = MappingProxyType({})
# Canonical label blocks read before, by their raw text (a value key: equal text, equal labels).
# A target's page repeats its label sets every scrape, and reading a block costs ~4 µs against a
# lookup's ~0.05 µs: on a real vLLM 0.32 page, 0.32 of the parse's 0.48 ms (docs/benchmarks.md,
# the parser's goal of issue 31). Bounded by clearing: endless distinct label sets must not grow
# memory forever. Only the fast path's canonical blocks are kept (the careful path is rare).
_LABEL_CACHE: dict[str, Mapping[str, str]] = {"": _EMPTY}
_LABEL_CACHE_MAX = 8192

MAX_LINE_CHARS = 16 * 1024  # of one wanted line after its name (vLLM's longest, a LoRA list, is far below)
MAX_LABEL_VALUE_CHARS = 1024  # of one label value (a model name, a path)
MAX_BUCKETS = 1000  # of one histogram series (vLLM's have 10 to 40)
_LONG_VALUE_RE = re.compile(rf'="(?:[^"\\\n]|\\.){{{MAX_LABEL_VALUE_CHARS + 1}}}')
_LE_RE = re.compile(r'\ble\s*=\s*"[^"]*"')

# The careful path takes any wanted line the fast pattern does not (blanks inside the label block,
# three value tokens, a '}' inside a label value...). It follows prometheus_client.parser's leniency.
_LAX_NAME = rf'(?:{_LABEL_NAME}|"(?:[^"\\]|\\.)*")'
_LAX_PAIR = rf'\s*{_LAX_NAME}\s*=\s*"(?:[^"\\]|\\.)*"\s*'
# Separators: commas, where two commas need blanks between them (the reference skips the empty
# term in ", ," but refuses ",,").
_LAX_SEP = r",(?:\s+,)*"
_LAX_LABELS_RE = re.compile(rf"\s*(?:{_LAX_SEP})?(?:{_LAX_PAIR}(?:{_LAX_SEP}{_LAX_PAIR})*(?:{_LAX_SEP})?)?\s*", re.S)
_LAX_PAIRS_RE = re.compile(rf'\s*({_LAX_NAME})\s*=\s*"((?:[^"\\]|\\.)*)"', re.S)
_LAX_BLOCK_RE = re.compile(r'\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\}(.*)', re.S)


class _BadLine(ValueError):
    """A wanted line that cannot be read; becomes a ScrapeError with the line number."""


class SelectiveParser:
    """Reads only the samples named in ``wanted`` (exact sample names, e.g. ``x_bucket``, ``x_total``).

    Build once and reuse: the constructor compiles the pattern for the set of names.
    """

    def __init__(self, wanted: Iterable[str], series_labels: Iterable[str] = ()) -> None:
        self.wanted = frozenset(wanted)
        # A series, for parse_limited: the values of these labels on a line (vLLM's model × engine).
        # Read from the raw line by one C-level search, before any label block is parsed.
        series = "|".join(map(re.escape, sorted(series_labels))) or "(?!)"
        self._series_re = re.compile(rf'(?<![A-Za-z0-9_])(?:{series})="(?:[^"\\\n]|\\.)*"')
        names = _trie_pattern(sorted(self.wanted))
        # Each hit is (name, label block, value, other): every line of a wanted name matches, a
        # canonical line ``name{...} value`` in the first three groups, any other line's rest in
        # "other" (_fast gives a page with one to the careful pass, as it does a value that is no
        # number: an empty "other" is only a line of the name alone, whose value is then ""). A literal "\n" anchor (the text gets one in front) lets the regex engine jump from
        # line to line; "^" in MULTILINE mode tries every character (4x slower). Splitting the line
        # here costs less than str.rpartition on each hit (0.10 against 0.13 ms on a real vLLM
        # page). Leading blanks (any whitespace but a newline, as the reference's str.strip()
        # removes) are allowed in the one pattern: a separate scan for indented lines cost more.
        self._re = re.compile(rf"\n[^\S\n]*({names})(?![{_NAME_CHARS}])(?:(\{{.*\}}|) (\S*)(?=\n|\Z)|(.*))")

    def parse(self, text: str) -> list[Sample]:
        """All wanted samples of ``text`` in page order. Values are floats (NaN and ±Inf kept).

        Raises ScrapeError, naming the line, when a wanted sample line is malformed.
        """
        names, labels, values = self.parse_columns(text)
        return list(zip(names, labels, values, strict=True))

    def parse_columns(self, text: str) -> Columns:
        """``parse`` as columns: (names, labels, values), one entry per sample."""
        return self.parse_limited(text, None)[0]

    def parse_limited(self, text: str, max_series: int | None) -> tuple[Columns, int]:
        """:meth:`parse_bounded` without the count of lines refused."""
        columns, dropped, _ = self.parse_bounded(text, max_series)
        return columns, dropped

    def parse_bounded(self, text: str, max_series: int | None) -> tuple[Columns, int, int]:
        """``parse_columns`` of the samples of the page's first ``max_series`` series only (distinct
        values of ``series_labels``, in page order; None: all), how many series were left out, and
        how many lines were refused over the line, label-value or bucket bounds.

        See :meth:`parse_page`.
        """
        page = self.parse_page(text, max_series)
        return (page.names, page.labels, page.values), page.dropped, page.refused

    def parse_page(self, text: str, max_series: int | None = None) -> Page:
        """The page's wanted samples with their raw label blocks; ``max_series`` as in parse_limited.

        As Prometheus' ``sample_limit``, a page cannot make its reader hold more than it allows:
        the cut is made on the raw lines, so the samples left out never have their labels or values
        read. The same page keeps the same series; a series that first appears later is left out.
        """
        text = "\n" + text
        found = self._re.findall(text)
        # The bounds (line, label value, buckets) cost a pass over every line, so they are checked
        # where a line over one can be: a page with more lines than MAX_BUCKETS (a crowded
        # histogram), and the careful pass. The fast pass takes only lines without "other" text
        # whose label blocks were read before or are within the bounds (_strict_labels refuses a
        # long value), so a usual page is never looked at twice (bench/bench_parse.py).
        mask = _within_bounds(found) if len(found) > MAX_BUCKETS else None
        rows, kept, dropped = self._cut(found, mask, max_series)
        fast = _fast(rows)
        if fast is not None:
            return Page(*fast, dropped, len(found) - len(rows) if mask is not None else 0)
        if mask is None:
            mask = _within_bounds(found)
            rows, kept, dropped = self._cut(found, mask, max_series)
        refused = 0 if mask is None else mask.count(False)
        matches: Iterator[re.Match[str]] = self._re.finditer(text)  # the same lines, in the same order, as found
        if mask is not None:
            matches = compress(matches, mask)
        if kept is not None:
            is_kept, find = kept.__contains__, self._series_re.findall
            matches = (m for m in matches if is_kept(frozenset(find("".join(filter(None, _REST(m)))))))
        samples = list(_careful_pass(matches, text))
        return Page(tuple(map(_NAME, samples)), None, list(map(_LABELS, samples)), list(map(_VALUE, samples)), dropped,
                    refused)  # fmt: skip

    def _cut(self, found: list[tuple[str, str, str, str]], mask: list[bool] | None,
             max_series: int | None) -> tuple[list[tuple[str, str, str, str]], set[frozenset[str]] | None, int]:
        """The lines within the bounds (``mask``) of the page's first ``max_series`` series, those
        series (None: all kept) and how many were left out."""
        rows = found if mask is None else list(compress(found, mask))
        if max_series is None or len(rows) <= max_series:  # fewer samples than that: nothing to cut
            return rows, None, 0
        keys = [frozenset(self._series_re.findall(block + value + other)) for _, block, value, other in rows]
        series = dict.fromkeys(keys)  # in page order
        if len(series) <= max_series:
            return rows, None, 0
        kept = set(islice(series, max_series))
        return list(compress(rows, map(kept.__contains__, keys))), kept, len(series) - max_series


_BLOCK, _VALUE_TEXT, _OTHER = itemgetter(1), itemgetter(2), itemgetter(3)


def _rest(row: tuple[str, str, str, str]) -> str | None:
    """The line after its name as written (None: over the line or label-value bound)."""
    _, block, value, other = row
    rest = other or f"{block} {value}"  # a canonical hit's groups leave out the space before its value
    return None if len(rest) > MAX_LINE_CHARS or _LONG_VALUE_RE.search(rest) else rest


def _within_bounds(rows: list[tuple[str, str, str, str]]) -> list[bool] | None:
    """Which of ``rows`` are within the bounds (None: all are). Cheap when nothing is over: the
    longest field of each column (in C), and a count per name only on a page with more wanted lines
    than MAX_BUCKETS (no histogram of a smaller page can have more buckets than that)."""
    mask: list[bool] | None = None
    # a line can be over a bound only where one of its fields is longer than a label value may be
    # (vLLM's cache_config_info block is): those few lines are looked at, the others not at all
    longer = MAX_LABEL_VALUE_CHARS.__lt__
    long = sorted({i for column in (_BLOCK, _VALUE_TEXT, _OTHER)
                   for i in compress(range(len(rows)), map(longer, map(len, map(column, rows))))})  # fmt: skip
    over = [i for i in long if _rest(rows[i]) is None]
    if over:
        mask = [True] * len(rows)
        for i in over:
            mask[i] = False
    if len(rows) <= MAX_BUCKETS:
        return mask
    counts = Counter(map(_NAME, rows))
    crowded = {n for n, c in counts.items() if c > MAX_BUCKETS and n.endswith("_bucket")}
    if crowded:
        mask = mask or [True] * len(rows)
        seen: Counter[tuple[str, str]] = Counter()
        for i, (name, block, _, other) in enumerate(rows):
            if name in crowded and mask[i]:
                key = (name, _LE_RE.sub("", (block or other).rpartition("}")[0]))
                seen[key] += 1
                mask[i] = seen[key] <= MAX_BUCKETS
    return mask


def parse(text: str, wanted: Iterable[str]) -> list[Sample]:
    """One-off convenience: ``SelectiveParser(wanted).parse(text)`` (compiles the pattern each call)."""
    return SelectiveParser(wanted).parse(text)


def _fast(
    rows: list[tuple[str, str, str, str]],
) -> tuple[tuple[str, ...], tuple[str, ...], list[Mapping[str, str]], list[float]] | None:
    """(names, blocks, labels, values) when every wanted line is canonical (``name{labels} value``); else None.

    Column-wise with map/zip so the per-sample work runs in C: this is the hot loop. Anything
    unusual (a timestamp, a tab, blanks in the label block, "_" in a value) returns None and the
    whole page takes the careful pass.
    """
    if not rows:
        return (), (), [], []
    names, blocks, values, others = zip(*rows, strict=True)
    if any(others):
        return None
    numbers = read_values(values)
    if numbers is None:
        return None
    known = list(map(_LABEL_CACHE.get, blocks))
    if None not in known:
        return names, blocks, cast("list[Mapping[str, str]]", known), numbers
    try:
        labels = [_strict_labels(b) if k is None else k for k, b in zip(known, blocks, strict=True)]
    except ValueError:
        return None
    return names, blocks, labels, numbers


def read_values(values: Sequence[str]) -> list[float] | None:
    """The floats of value tokens, or None when one is not a number as the reference reads it.

    float() takes blanks around the number (the reference strips each line and the value) and
    refuses "" and inner blanks, as the reference does, but takes "1_000", which the reference
    refuses. Each distinct token is converted once: a page repeats few values (zero buckets, full
    buckets equal to the count, one ``_created`` time per engine), and a dict lookup costs a
    fraction of float() (the simulator's page: 116 values, 24 distinct, 25 → 15 µs).
    """
    if "_" in "".join(values):
        return None
    try:
        if len(values) < 16:  # a gateway's few samples: the dicts would cost more than they save
            return list(map(float, values))
        distinct = dict.fromkeys(values)
        floats = dict(zip(distinct, map(float, distinct), strict=True))
    except ValueError:
        return None
    return list(map(floats.__getitem__, values))


def _careful_pass(matches: Iterator[re.Match[str]], text: str) -> Iterator[Sample]:
    """Second pass with match positions, used only when the fast pass met an unusual line."""
    for m in matches:
        try:
            sample = _careful_line(m.group(1), text[m.start(1) : m.end()])
        except _BadLine as exc:
            line_no = text.count("\n", 0, m.start()) + 1  # m.start() is the "\n" ending the previous line
            line = text[m.start() : m.end()].strip()
            raise ScrapeError(f"line {line_no}: {exc}: {line[:160]!r}") from None
        if sample is not None:
            yield sample


def _trie_pattern(names: list[str]) -> str:
    """A regex alternation factored by common prefixes: a non-matching line is rejected in few steps."""
    if not names:
        return "(?!)"  # nothing wanted: a pattern that never matches (an empty one would match all)
    trie: dict[str, dict] = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[""] = {}
    return _trie_node(trie)


def _trie_node(node: dict[str, dict]) -> str:
    branches = [re.escape(ch) + _trie_node(child) if ch else "" for ch, child in sorted(node.items())]
    if len(branches) == 1:
        return branches[0]
    alternation = "|".join(b for b in branches if b)
    return f"(?:{alternation})" + ("?" if "" in branches else "")


def _unescape(value: str) -> str:
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], value) if "\\" in value else value


def _checked(pairs: list[tuple[str, str]]) -> Mapping[str, str]:
    """Checked, read-only labels from (name, escaped value) pairs."""
    labels = {name: _unescape(value) for name, value in pairs}
    if len(labels) != len(pairs):
        raise _BadLine("a label name appears twice")
    if any(name.startswith("__") for name in labels):
        raise _BadLine("label names starting with __ are reserved")
    return MappingProxyType(labels)


def _strict_labels(block: str) -> Mapping[str, str]:
    """Labels of a fast-path block: "" or "{...}" exactly as client libraries write it."""
    if not block:
        return _EMPTY
    if not (block.startswith("{") and block.endswith("}") and _STRICT_LABELS_RE.fullmatch(block, 1, len(block) - 1)):
        raise _BadLine("not a canonical label set")  # the fast pass gives the line to the careful one
    # near or over a bound (a line's block and the shortest value, " 0"): the careful pass measures
    # the whole line and refuses it (_within_bounds)
    if len(block) > MAX_LABEL_VALUE_CHARS and (len(block) > MAX_LINE_CHARS - 2 or _LONG_VALUE_RE.search(block)):
        raise _BadLine("a line or label value at or over its bound")
    labels = _checked(_PAIRS_RE.findall(block))
    if len(_LABEL_CACHE) >= _LABEL_CACHE_MAX:
        _LABEL_CACHE.clear()
        _LABEL_CACHE[""] = _EMPTY
    _LABEL_CACHE[block] = labels
    return labels


def _careful_line(name: str, line: str) -> Sample | None:
    """Parse one line starting with ``name`` with the reference parser's leniency.

    None when the reference would read another name there (``name}{...}``: its name is not ours).
    """
    line = line.strip()
    brace = line.find("{")
    if brace == -1 or " # " in line[:brace]:
        cut = min((i for i in (line.find(" "), line.find("\t")) if i != -1), default=-1)
        if cut == -1:
            raise _BadLine("no value after the name")
        if line[:cut] != name:
            return None
        return name, _EMPTY, _value_and_stamp(line[cut + 1 :])
    if line[:brace].strip() != name:
        return None
    m = _LAX_BLOCK_RE.fullmatch(line, brace)
    if m is None:
        raise _BadLine("label set not closed by '}'")
    return name, _lax_labels(m.group(1)), _value_and_stamp(m.group(2))


def _lax_labels(block: str) -> Mapping[str, str]:
    if _LAX_LABELS_RE.fullmatch(block) is None:
        raise _BadLine('malformed label set (expected name="value" pairs separated by commas)')
    pairs = [(_unescape(n[1:-1]) if n.startswith('"') else n, v) for n, v in _LAX_PAIRS_RE.findall(block)]
    return _checked(pairs)


def _value_and_stamp(s: str) -> float:
    """The value (and an optional timestamp, checked then dropped), split as the reference does."""
    s = s.lstrip()
    tokens = [t.strip() for t in s.split(" " if " " in s else "\t") if t.strip()]
    if not tokens:
        raise _BadLine("no value")
    value = _number(tokens[0])
    if len(tokens) > 1:
        _number(tokens[-1])  # the reference ignores middle tokens and reads the last as timestamp
    return value


def _number(token: str) -> float:
    if "_" not in token:
        try:
            return float(int(token))
        except (ValueError, OverflowError):
            try:
                return float(token)
            except ValueError:
                pass
    raise _BadLine(f"{token[:40]!r} is not a number")


def require_exposition(text: str, hint: str = "") -> None:
    """Raise ScrapeError("not Prometheus text ...") when the head of ``text`` is not exposition format.

    Only for error paths (a payload that yielded nothing we want): it asks the reference parser,
    which is slow, about the first 20 lines only.
    """
    from prometheus_client.parser import text_string_to_metric_families

    head = "\n".join(text.strip().splitlines()[:20])
    try:
        list(text_string_to_metric_families(head + "\n"))
    except (ValueError, TypeError, IndexError) as exc:
        raise ScrapeError(f"not Prometheus text ({str(exc)[:120]})", hint) from None
