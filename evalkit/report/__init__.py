"""Reporting (no side of the trust boundary: reads rows only, never torch): ``evalkit report`` works
where torch cannot be imported.

``scoring`` (pure scores), ``summary`` (``summary.json`` and the pages), ``run_diff`` (what changed
between two reports), ``text`` (terminal tables), ``host_facts`` (the report host), ``html`` (pages)."""
