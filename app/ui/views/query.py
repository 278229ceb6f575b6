"""Query: read-only SQL over the whole history's views, with canned and saved queries (docs/query.md)."""

from __future__ import annotations

import streamlit as st

from app.ui import page, query_page

ctx = page.context()
query_page.warm(ctx.settings.db_url)
st.header("Query")
st.caption("One read-only SELECT over the views below; results are capped and time-limited. The URL carries the query.")

name, preset = query_page.choose_query(ctx.settings.db_url)
sql = st.text_area("SQL", value=preset, height=180, key=f"sql-{name or ''}-{hash(preset)}")
given = query_page.param_inputs(sql, name)
run = st.button("Run", type="primary", icon=":material/play_arrow:")
shared = "sql" in st.query_params or "canned" in st.query_params

if run or (shared and "query_outcome" not in st.session_state):
    st.query_params.clear()
    if name and sql.strip() == preset.strip():
        st.query_params["canned"] = name
    else:
        st.query_params["sql"] = sql
    st.query_params.update({f"p.{k}": v for k, v in given.items() if v})
    st.session_state["query_outcome"] = query_page.run(ctx.settings, sql, given, name)

if "query_outcome" in st.session_state:
    query_page.show_result(st.session_state["query_outcome"])

with st.expander("Save this query"):
    query_page.save_box(ctx.settings.db_url, sql)
with st.expander("Schema: views and columns"):
    query_page.schema_browser()
