"""The judgement, scored: a library of seeded scenarios with their ground truth (library.py), run
through the product's own collector ingestion, evaluator and stored verdicts (runner.py), scored
(score.py), and the same series through ``promtool test rules`` against other rule files
(promtool.py). docs/scenarios.md explains every scenario; ``python -m app scenarios`` prints the
scorecard."""
