"""Alerting: the sweet-spot rules, their lifecycle (evaluator), silences; delivery lives in app.notify."""
