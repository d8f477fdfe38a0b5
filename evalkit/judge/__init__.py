"""The trusted judge: building, the reference, comparison, timing, baselines, plausibility, one worker's
session, and turning what was observed into a result row (``verdicts``). Never imports submission code;
reads workers only through ``evalkit.sandbox.protocol``."""
