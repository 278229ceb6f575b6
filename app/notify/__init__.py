"""Alert delivery (docs/alerts.md, E-mail; Alertmanager and webhooks): grouping, a durable outbox,
SMTP, an Alertmanager's API and a JSON webhook (hooks.py), the digest.

The evaluator (app.alerts) decides states; this package only reads them and delivers. Its entry
point is :class:`app.notify.notifier.Notifier`, which takes its inputs as arguments: the engine,
the settings, a clock and a ``muted(state, now)`` callable (silences and mute windows).
"""
