"""Reporting (no side of the trust boundary: reads rows only, never torch): ``evalkit report`` works
where torch cannot be imported.

``scoring`` (pure scores, per run and per KernelBench level), ``summary`` (``summary.json`` and the pages),
``run_diff`` (what changed between reports), ``compare`` (the HTML comparison page), ``answer_text`` (the
answer shown on ``no_code`` pages), ``text`` (terminal tables), ``html`` (pages)."""
