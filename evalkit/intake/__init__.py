"""Text -> code, in the trusted process, where nothing runs: extraction, static scan, triage.

Everything here reads submission text, so everything here must be linear in its size: no regular
expression that backtracks, no parse that can recurse without bound.
"""
