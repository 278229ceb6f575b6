"""Names from outside made safe for each place they are written to. Pure.

A model name read from a ``/metrics`` page, a target or rule name from a configuration file, a
label value, a URL: each is data, whatever characters it holds. Each sink has its own rule:

- :func:`visible` for a terminal, a log line, a plain-text body: control characters (C0, DEL, C1,
  the Unicode line separators and bidirectional overrides) are shown as escapes (``\\n``, ``\\r``,
  ``\\x1b``), so a name cannot move the cursor, clear the screen, start a new log line or hide text;
- :func:`header` for an e-mail header or subject: :func:`visible` (so no CR or LF is left to break
  the header) and a bounded length;
- :func:`markdown` for a name inside Markdown (the dashboard's texts): :func:`visible`, then every
  character that can begin markup backslash-escaped (CommonMark) when it holds markup, so
  ``![x](http://host/x.png)`` is shown as typed and the viewer's browser fetches nothing, ``**``
  stays two asterisks; :func:`markdown_code` puts a value in a code span that nothing in it can
  close;
- :func:`csv_cell` for a cell of a CSV download (OWASP's CSV injection advice): a text beginning
  with ``=``, ``+``, ``-``, ``@``, a tab or a CR is prefixed with ``'``, so a spreadsheet reads it as
  text, never as a formula;
- every function but :func:`csv_cell` (which keeps the data whole) bounds the length
  (:data:`MAX_NAME` characters unless told), so one huge name costs its own field, never a page or
  an e-mail.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from core.redact import MaskingFormatter

MAX_NAME = 200  # characters of a name shown anywhere; longer ones are cut with "…"
MAX_HEADER = 250  # characters of an e-mail subject or header value (RFC 5322 folds it; readers cut it)
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# C0 controls, DEL, C1 controls; U+2028/2029 (line breaks to JavaScript and some terminals); the
# bidirectional embeddings, overrides and isolates (text that reads in another order than it runs);
# the characters that read as nothing (zero-width space, joiners, marks, word joiner, BOM, soft hyphen)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
# the characters that can begin markup anywhere in a line, and those that do at its start
_MARKUP_CHARACTER = re.compile(r"([\\`*_\[\]<>&$~|:!])")
_BLOCK_START = re.compile(r"^(\s*|\s*\d+)([-+#.)])")
# What can start markup in Markdown as Streamlit reads it: escapes, code, emphasis, links and images,
# HTML and entities, math, strikethrough, tables, its directives (:red[...], :material/icon:, emoji),
# and block markers at the start (lists, quotes, headings)
_MARKUP = re.compile(r"[\\`*_\[\]<&$~|]|:[\w/-]+[\[:]|^\s*([-+>]|\d+[.)]|#{1,6}(\s|$))")
# What GFM turns into a link by itself (autolink literals: a URL's "://", a "www." host, an e-mail's
# "@"). Streamlit finds them in the text after escapes are read, so no backslash breaks them: such a
# name is shown in a code span, where nothing is a link.
_LINK_SHAPE = re.compile(r"://|(?i:www)\.|@")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_TERMINAL_CONTROL = re.compile(_CONTROL.pattern.replace("\x00-\x1f", "\x00-\x08\x0b-\x1f"))  # LF and TAB kept


# Characters a name cannot hold because they read as nothing or move text: controls (Cc), format
# characters (Cf: zero-width space, joiners, bidirectional marks), line and paragraph separators,
# surrogates, private-use and unassigned code points.
_UNSEEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
# Letters of other scripts drawn like Latin ones (Unicode's confusables, the common ones): two names
# that differ only by these read the same.
_LOOKALIKE = str.maketrans({
    "а": "a", "в": "b", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t", "у": "y",
    "х": "x", "ѕ": "s", "і": "i", "ј": "j", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "ɡ": "g",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X",
    "І": "I", "Ј": "J", "Ѕ": "S", "α": "a", "ο": "o", "ρ": "p", "ν": "v", "τ": "t", "ι": "i", "κ": "k",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P",
    "Τ": "T", "Υ": "Y", "Χ": "X",
})  # fmt: skip


# Scripts whose letters are drawn alike: a name mixing two of them is refused (Latin with Han, say, is not)
_ALIKE_SCRIPTS = frozenset({"LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE"})
# More letters drawn like Latin ones, beyond NFKC (which already folds full-width, mathematical and
# ligature forms): Armenian, Cherokee, the dotless i, the Latin letters of IPA.
_MORE_LOOKALIKES = str.maketrans({
    "օ": "o", "ս": "u", "ց": "g", "հ": "h", "ո": "n", "ւ": "i", "Ꭺ": "A", "Ᏼ": "B", "Ꮯ": "C", "Ꭼ": "E", "Ꮋ": "H",
    "Ꮶ": "K", "Ꮇ": "M", "Ꮲ": "P", "Ꭲ": "T", "ı": "i", "ȷ": "j", "ɑ": "a", "ɩ": "i", "ʏ": "y", "ᴠ": "v", "ᴡ": "w",
    "ᴢ": "z", "ꮃ": "w", "һ": "h", "ϲ": "c", "ϳ": "j", "ɪ": "i", "ᴏ": "o", "ᴄ": "c", "ѵ": "v", "ԍ": "G",
    "ѡ": "w", "ɦ": "h", "ɜ": "3", "Ꮃ": "W", "Ꮪ": "S", "Ꮤ": "W", "Ᏺ": "h", "ꓲ": "I", "ꓳ": "O", "ꓴ": "U",
})  # fmt: skip
MAX_MARKS_IN_A_ROW = 2  # combining marks on one letter (a Vietnamese letter has two; more stack out of the line)


def _mark(c: str) -> bool:
    """Whether ``c`` is a mark drawn on the letter before it (an accent, a slash, a vowel sign)."""
    return unicodedata.category(c) in ("Mn", "Me")


def _script(c: str) -> str:
    """The script of a letter as its Unicode name begins (LATIN, CYRILLIC, GREEK, CJK...)."""
    return unicodedata.name(c, "?").split(" ", 1)[0]


def named(text: str, names: Mapping[str, str]) -> str:
    """``text`` with each setting's name in ``names`` replaced by what the user actually used for it
    (``targets[].vllm_url`` → ``--vllm-url`` for a target given as flags): every message names what
    the user can change. Longer names first, so ``targets[].gpu.source = none`` wins over its prefix."""
    for key in sorted(names, key=len, reverse=True):
        text = text.replace(key, names[key])
    return text


def name_problem(name: str, limit: int = MAX_NAME) -> str:
    """Why ``name`` cannot be a name (a thing people pick, compare and type: a target, a saved
    query, a label value, a host), or "" when it can: empty or blank, a character that reads as
    nothing (NUL, U+200B, a bidirectional mark), a space at an end, more than ``limit`` characters,
    not in its normal form (NFKC: full-width letters, ligatures, a letter and its mark apart),
    combining marks that stand alone or stack, or letters of two scripts drawn alike (``prоd``
    with a Cyrillic ``о`` reads as ``prod``). The message shows the name escaped (:func:`visible`)."""
    shown = f"'{visible(name, 60)}'"
    if not name.strip():
        return f"{shown} is empty or blank"
    if any(unicodedata.category(c) in _UNSEEN for c in name):
        return f"{shown} holds a control or invisible character (a zero-width space, NUL, a direction mark)"
    if name != name.strip():
        return f"{shown} begins or ends with a space"
    if len(name) > limit:
        return f"{shown} is longer than {limit} characters"
    normal = unicodedata.normalize("NFKC", name)
    if normal != name:
        return f"{shown} is not in its normal form (NFKC); write it as '{visible(normal, 60)}'"
    run = 0
    for i, c in enumerate(name):
        run = run + 1 if _mark(c) else 0
        if run and (i == 0 or run > MAX_MARKS_IN_A_ROW):
            return f"{shown} holds combining marks that stand alone or stack ({run} on one letter)"
    scripts = sorted({_script(c) for c in name if c.isalpha()} & _ALIKE_SCRIPTS)
    if len(scripts) > 1:
        return f"{shown} mixes {' and '.join(scripts)} letters, which can read alike"
    return ""


def name_skeleton(name: str) -> str:
    """What two names that read the same share (a confusable skeleton, after Unicode's UTS #39):
    NFKC-normalised (full-width letters, ligatures, a no-break space), stripped, combining marks
    taken off (``pród`` reads as ``prod``), look-alike letters of other scripts as their Latin
    twins, and no character that reads as nothing. Two names with one skeleton are one name."""
    text = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", name).strip())
    bare = "".join(c for c in text if not _mark(c) and unicodedata.category(c) not in _UNSEEN)
    return bare.translate(_LOOKALIKE).translate(_MORE_LOOKALIKES)


name_key = name_skeleton  # the name its first callers know


def same_name_problem(name: str, others: Iterable[str], what: str = "name") -> str:
    """Why ``name`` cannot stand beside ``others`` (it reads the same as one of them but is not it), or ""."""
    skeleton = name_skeleton(name)
    for other in others:
        if other != name and name_skeleton(other) == skeleton:
            return f"'{visible(name, 60)}' reads the same as the {what} '{visible(other, 60)}'"
    return ""


def host_problem(host: str) -> str:
    """Why ``host`` (a URL's) cannot be used as it is written, or "": a host holding letters that
    are not ASCII can read as another host (``exаmple.com`` with a Cyrillic ``а``), so it is
    written in its ASCII form (``xn--...``, as DNS carries it); a percent-escape or a character
    that reads as nothing hides what it is."""
    if host.isascii():
        bracketed = host.startswith("[")  # an IPv6 address, whose zone is written after a %
        return f"'{visible(host, 60)}' holds a percent-escape" if "%" in host and not bracketed else ""
    try:
        ascii_form = host.encode("idna").decode("ascii")
    except UnicodeError:
        return f"'{visible(host, 60)}' is not a host name (letters that are not ASCII and not a valid international name)"
    return (f"'{visible(host, 60)}' holds letters that are not ASCII, which can read as another host; "
            f"write it as '{ascii_form}'")


SETTINGS_OWNER = "the settings"


class NameClaims:
    """Who holds each target name, by :func:`name_key` (two names that read the same are one): a
    configured target's name is the settings', a discovered one the first source's that reported
    it. Two sources reporting one instance, or a source reporting a look-alike of a name held,
    must not write into one target: :meth:`claim` says why not. Safe to share between threads."""

    def __init__(self, configured: tuple[str, ...] | list[str] = ()) -> None:
        self._owners: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        for name in configured:
            self.claim(name, SETTINGS_OWNER)

    def claim(self, name: str, owner: str) -> str:
        """"" when ``name`` is ``owner``'s (claimed now or before), else why it is not."""
        key = name_key(name)
        with self._lock:
            held = self._owners.setdefault(key, (owner, name))
        if held == (owner, name):
            return ""
        if held[0] == SETTINGS_OWNER:
            same = "a configured target's name" if held[1] == name else f"reads the same as the configured target {visible(held[1])!r}"
            return same
        if held[0] != owner:
            return f"is reported by {held[0]} too (it writes that target)"
        return f"reads the same as {visible(held[1])!r}, a target of this source"


def _escape(match: re.Match[str]) -> str:
    c = match.group(0)
    return _SHORT.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def escaped(text: str) -> str:
    """``text`` with its control characters shown as escapes, whatever its length (a log message)."""
    return _CONTROL.sub(_escape, text)


def bounded(text: str, limit: int = MAX_NAME) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when anything was cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def visible(value: Any, limit: int = MAX_NAME) -> str:
    """``value`` as text for a terminal, a log or a plain-text body: control characters escaped, bounded.

    ``visible("llama\\r\\n\\x1b[2J")`` is ``llama\\\\r\\\\n\\\\x1b[2J``: one line, drawn as typed.
    """
    return bounded(escaped(str(value)), limit)


def terminal(text: str) -> str:
    """A text of several lines for a terminal: every control character but LF shown as an escape
    (names in it should have been made :func:`visible` already, so that their own LFs are escaped too)."""
    return "\n".join(escaped(line) for line in text.split("\n"))


MAX_LINE = 10_000  # characters of one line a command prints for a terminal; the rest is cut, and said


class TerminalWriter:
    """A text stream (a command's stdout) that shows every control character it is given but LF and
    TAB as an escape (:func:`escaped`) and cuts each line at ``limit`` characters, saying how many
    were left out: whatever text from outside a command prints (a model name read from a page, a
    server's answer), the terminal draws it as typed, and one huge name costs one bounded line."""

    def __init__(self, stream: Any, limit: int = MAX_LINE) -> None:
        self.stream, self.limit = stream, limit
        self._column = self._cut = 0

    def write(self, text: str) -> int:
        parts = text.split("\n")
        for i, part in enumerate(parts):
            if i:
                self._end_line()
            part = _TERMINAL_CONTROL.sub(_escape, part)
            room = max(0, self.limit - self._column)
            self.stream.write(part[:room])
            self._column += min(len(part), room)
            self._cut += max(0, len(part) - room)
        return len(text)

    def _end_line(self) -> None:
        if self._cut:
            self.stream.write(f" … [{self._cut} more characters not shown]")
        self.stream.write("\n")
        self._column = self._cut = 0

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding...: the stream's own
        return getattr(self.stream, name)


def header(value: Any, limit: int = MAX_HEADER) -> str:
    """``value`` for an e-mail header or subject: no CR, LF or other control character, bounded."""
    return visible(value, limit)


def markdown(value: Any, limit: int = MAX_NAME) -> str:
    """``value`` as literal text inside Markdown: control characters escaped, bounded, and every
    character that can begin markup backslash-escaped (no link, image, emphasis, code, HTML, math
    or Streamlit directive such as ``:red[...]`` can start in it, nor a list or heading). Text without markup is returned
    as it is (escaping would not change how it reads); text holding a link's shape (``://``, ``www.``,
    ``@``) is a code span (:func:`markdown_code`), which GFM never turns into a link."""
    text = visible(value, limit)
    if _LINK_SHAPE.search(text):
        return markdown_code(text, limit)
    if not _MARKUP.search(text):
        return text
    return _BLOCK_START.sub(r"\1\\\2", _MARKUP_CHARACTER.sub(r"\\\1", text))


def reads_the_same_in_markdown(value: str) -> bool:
    """Whether ``value`` shown as Markdown reads as the text it is: no control character, no
    character that starts markup or a link (``://``, ``www.``, ``@``), no list or quote marker at its start (``meta-llama/Llama-3.3-70B``
    does; ``![x](http://host/x.png)`` does not). For widgets whose labels are Markdown and cannot be
    escaped without changing the value they stand for."""
    return visible(value) == value and not _MARKUP.search(value) and not _LINK_SHAPE.search(value)


def markdown_code(value: Any, limit: int = MAX_NAME) -> str:
    """``value`` as a Markdown code span: fenced by one backtick more than the longest run of
    backticks in it (CommonMark), so nothing in it can close the span early."""
    text = visible(value, limit)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def csv_cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet reads as the text it is: a text starting like a formula gets a
    leading ``'`` (numbers and None pass unchanged, so ``-3`` stored as a number stays a number)."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


class LogFormatter(MaskingFormatter):
    """Escapes control characters in a log line's message (a name holding CR/LF cannot forge a
    second line, nor an escape sequence reach the terminal); a traceback keeps its lines. Every
    line is masked as well (core.redact.MaskingFormatter)."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return escaped(super().formatMessage(record))
