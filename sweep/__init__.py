"""Closed-loop load sweep against any OpenAI-compatible server (the field report's sweep, automated).

Modules, one concept each:

- ``workload``: the request mix (short / long classes of DOMAIN.md §2) and synthetic prompts.
- ``client``: one streaming request over SSE, timed (TTFT, inter-token gaps, end-to-end).
- ``runner``: N clients in a closed loop per concurrency level, for a fixed duration.
- ``stats``: per-level figures (tok/s, QPS, percentiles) from the request records.
- ``verdict``: the recommended sweet-spot concurrency and gateway limit.
- ``report``: the result table and the JSON document.
- ``progress``: a plain-text progress bar with ETA on stderr.

Results are the ``db.results`` records ``SweepLevel`` and ``SweepRun``.
"""
