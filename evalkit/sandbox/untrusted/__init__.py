"""Untrusted side: code that runs inside the submission's interpreter. Nothing here is believed by the
judge; it may import only the standard library, torch, ``evalkit.sandbox.protocol`` and
``evalkit.sandbox.clock``, never the judge."""
