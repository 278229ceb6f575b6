"""Alert e-mail delivery (docs/alerts.md, E-mail): grouping, a durable outbox, SMTP, the digest.

The evaluator (app.alerts) decides states; this package only reads them and delivers. Its entry
point is :class:`app.notify.notifier.Notifier`, which takes its inputs as arguments: the engine,
the settings, a clock and a ``muted(state, now)`` callable (silences and mute windows).
"""
