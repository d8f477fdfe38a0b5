"""The trust boundary.

- ``protocol``: every message the judge sends and every reply a worker may make (stdlib only; both sides
  import it). A reply is only ever read through it, and what it holds is named as the worker's claim.
- ``launcher``: trusted. Starts one worker process per submission and stage, limits it, watches it, kills it.
- ``identity``: trusted. Who a worker runs as (an unprivileged user when evalkit is root), its environment.
- ``shared_buffers``: both sides. The judge-owned input and output tensors a worker is handed.
- ``cuda_buffers``: both sides. On a GPU, the memory behind them: the judge's own, lent by IPC handle and
  freed by the judge once the worker is gone.
- ``clock``: the device clock, on both sides (inside the sandbox, the submission's to rewrite).
- ``untrusted/``: what runs inside the submission's interpreter (the worker harness, giving up privileges,
  Landlock). Trusted by nothing: the submission can rewrite all of it.
"""
