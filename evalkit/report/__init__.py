"""Reporting: reads ``results.jsonl`` rows only and never imports torch (``evalkit report`` works where
torch cannot be imported). Scores, summary, run diff, text and HTML."""
