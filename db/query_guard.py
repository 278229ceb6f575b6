"""The first line of defence for a user's ad-hoc SQL: read the text as the database will, refuse
what is not one plain SELECT.

This is a lexer, not a parser: it splits the text into words, quoted identifiers, literals and
punctuation the way SQLite and PostgreSQL do (comments and string literals hold no code), then
applies the rules of :data:`RULES`. Each refusal names its rule. It is one of three layers
(docs/query.md): the connection itself is read-only (SQLite ``mode=ro`` + an authorizer,
PostgreSQL ``READ ONLY`` transaction with a statement timeout and a search path limited to the
views), so a gap here still cannot write. The lexer errs on the refusing side: text it cannot read
unambiguously (an unterminated comment or literal, PostgreSQL's ``U&`` escapes) is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.errors import QueryError

HINT = "See docs/query.md for what a query may do"
PRAGMA_HINT = "The views' columns and units are listed in docs/query.md and in the Query page's schema browser"
STARTS = ("select", "with", "values")

# rule name → (what it refuses, the words refused). Words are compared outside literals and comments.
RULES: dict[str, tuple[str, frozenset[str]]] = {
    "no-writes": (
        "statements that write or change the schema",
        frozenset(
            "insert update delete merge upsert into truncate create drop alter grant revoke "
            "reindex cluster refresh import security owned".split()
        ),
    ),
    "no-files": ("statements that read or write files", frozenset("copy attach detach vacuum load backup".split())),
    "no-settings": ("statements that change settings", frozenset("set reset pragma discard".split())),
    "no-procedures": ("procedural blocks and calls", frozenset("do call execute prepare deallocate".split())),
    "no-transactions": (
        "transaction control and locks",
        frozenset("begin commit rollback savepoint release lock share listen notify unlisten checkpoint".split()),
    ),
}

# Functions refused wherever their name appears (unquoted or quoted): they touch files, settings,
# other sessions or run SQL text of their own (query_to_xml runs any string as a query).
DENIED_FUNCTIONS = frozenset(
    """load_extension readfile writefile edit fts3_tokenizer fts5 zipfile sqlar_compress sqlar_uncompress
    sqlite_dbpage sqlite_dbdata
    pg_read_file pg_read_binary_file pg_ls_dir pg_stat_file lo_import lo_export dblink dblink_exec
    set_config pg_reload_conf pg_rotate_logfile pg_terminate_backend pg_cancel_backend pg_promote
    pg_notify query_to_xml query_to_xmlschema query_to_xml_and_xmlschema cursor_to_xml cursor_to_xmlschema
    table_to_xml table_to_xmlschema table_to_xml_and_xmlschema schema_to_xml schema_to_xmlschema
    schema_to_xml_and_xmlschema database_to_xml database_to_xmlschema database_to_xml_and_xmlschema
    nextval setval txid_current pg_current_xact_id pg_switch_wal pg_import_system_collations
    pg_file_write pg_file_rename pg_file_unlink pg_logdir_ls pg_sleep_for pg_sleep_until""".split()
)
DENIED_PREFIXES = (
    "pg_ls_",
    "pg_read_",
    "pg_file_",
    "lo_",
    "dblink",
    "pg_advisory",
    "pg_try_advisory",
    "pg_create_",
    "pg_drop_",
    "pg_replication_",
    "pg_logical_",
    "pg_backup_",
    "pg_start_backup",
    "pg_stop_backup",
    "pg_wal_replay_",
)


@dataclass(frozen=True)
class Token:
    kind: str  # word, quoted (a quoted identifier), string, number, punct
    text: str  # lower-cased for words and quoted identifiers


def refuse(rule: str, message: str, hint: str = HINT) -> QueryError:
    return QueryError(f"refused by rule {rule}: {message}", hint, rule)


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_NUMBER = re.compile(r"[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?")
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def tokens(sql: str, dialect: str) -> list[Token]:
    """The text's tokens with comments dropped; raises QueryError (rule ``readable``) on text the
    lexer cannot read unambiguously."""
    out: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            # Ends at the first "*/" even on PostgreSQL, which nests comments: what is comment here is
            # comment there too, and any text PostgreSQL would still skip is checked as code (refusing more).
            end = sql.find("*/", i + 2)
            if end < 0:
                raise refuse("readable", "a /* comment is not closed")
            i = end + 2
        elif c == "'":
            i = _string(sql, i, backslash=_e_prefix(sql, i), out=out)
        elif c in "uU" and sql.startswith("&", i + 1) and dialect == "postgresql":
            raise refuse("readable", "U& escapes in literals or identifiers are not accepted")
        elif c == '"' or (dialect == "sqlite" and c in "`["):
            i = _quoted(sql, i, {"[": "]"}.get(c, c), out)
        elif c == "$" and dialect == "postgresql" and (m := _DOLLAR.match(sql, i)):
            end = sql.find(m.group(0), m.end())
            if end < 0:
                raise refuse("readable", f"the {m.group(0)} quoted literal is not closed")
            out.append(Token("string", sql[m.end() : end]))
            i = end + len(m.group(0))
        elif m := _WORD.match(sql, i):
            out.append(Token("word", m.group(0).lower()))
            i = m.end()
        elif m := _NUMBER.match(sql, i):
            out.append(Token("number", m.group(0)))
            i = m.end()
        else:
            out.append(Token("punct", c))
            i += 1
    return out


def _e_prefix(sql: str, i: int) -> bool:
    # E'...' (PostgreSQL): backslash escapes apply; the E must be a token of its own
    return i > 0 and sql[i - 1] in "eE" and (i < 2 or not (sql[i - 2].isalnum() or sql[i - 2] in "_$"))


def _string(sql: str, i: int, backslash: bool, out: list[Token]) -> int:
    if backslash and out and out[-1] == Token("word", "e"):
        out.pop()
    j, n, text = i + 1, len(sql), []
    while j < n:
        c = sql[j]
        if backslash and c == "\\":
            text.append(sql[j : j + 2])
            j += 2
        elif c == "'":
            if sql.startswith("''", j):
                text.append("'")
                j += 2
            else:
                out.append(Token("string", "".join(text)))
                return j + 1
        else:
            text.append(c)
            j += 1
    raise refuse("readable", "a string literal is not closed")


def _quoted(sql: str, i: int, close: str, out: list[Token]) -> int:
    j, n, text = i + 1, len(sql), []
    while j < n:
        if sql[j] == close:
            if close != "]" and sql.startswith(close * 2, j):
                text.append(close)
                j += 2
                continue
            out.append(Token("quoted", "".join(text).lower()))
            return j + 1
        text.append(sql[j])
        j += 1
    raise refuse("readable", f"a {sql[i]} quoted identifier is not closed")


def is_denied_function(name: str) -> bool:
    """True for a function a query may not call (compared lower-cased)."""
    name = name.lower()
    return name in DENIED_FUNCTIONS or name.startswith(DENIED_PREFIXES)


def check(sql: str, dialect: str) -> str:
    """The statement to run (a trailing ``;`` removed), or QueryError naming the rule it breaks."""
    toks = tokens(sql, dialect)
    while toks and toks[-1] == Token("punct", ";"):
        toks.pop()
    if not toks:
        raise refuse("one-statement", "the text holds no statement", "Write a SELECT")
    if Token("punct", ";") in toks:
        raise refuse("one-statement", "the text holds more than one statement", "Send one SELECT at a time")
    if toks[0].kind != "word" or toks[0].text not in STARTS:
        first = toks[0].text.upper()
        raise refuse("select-only", f"a query starts with SELECT, WITH or VALUES, not {first}")
    for tok in toks:
        if tok.kind in ("word", "quoted") and tok.text.startswith("pragma_"):
            raise refuse("no-settings", f"{tok.text}() runs a PRAGMA, and PRAGMAs are refused (they read and change "
                         "the database's own settings, not the data)", PRAGMA_HINT)  # fmt: skip
        if tok.kind in ("word", "quoted") and is_denied_function(tok.text.lower()):
            raise refuse("no-file-or-setting-functions", f"{tok.text}() touches files, settings or other sessions")
        if tok.kind != "word":
            continue
        for rule, (what, words) in RULES.items():
            if tok.text in words:
                raise refuse(rule, f"{tok.text.upper()} is refused ({what} are not allowed)")
    return sql.strip().rstrip(";").rstrip()
