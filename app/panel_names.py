"""The dashboard's time panels by name, in the Overview's order: the one list of them.

app/ui/charts.py ``PANELS`` draws each (its lines, threshold and title) and the Overview draws them
all, reading what they draw; an alert rule's ``panel`` (app/alerts/rules.py) names one for its
e-mail's chart (app/notify/images.py). Here rather than in the chart code so that the settings'
check of a rule's ``panel`` needs no plotting library (tests/test_panels.py holds the two equal).
"""

from __future__ import annotations

PANEL_NAMES = ("ttft", "throughput", "mbu", "preemptions", "concurrency", "kv_cache", "prefix_cache", "outcomes")
