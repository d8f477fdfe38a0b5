"""Trusted side: the programs a sandbox runs, and how the judge speaks to each (``launcher.UntrustedProcess``).

- ``ANSWER_WORKER``: an answer's worker, or a build's (``untrusted.worker``, ``protocol``);
- ``REFERENCE_WORKER``: the worker of an untrusted reference, a problem given as text
  (``evalkit.judge.reference_worker``, ``reference_protocol``).

Each names the module ``python -m`` runs, how its replies are read (each one's declared claims, checked before
anything else sees them) and the request that asks it to stop; ``SETUP_REQUESTS`` are the first requests the
launcher completes with what is its own to decide (the sandbox's uid, its extension folder).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from evalkit.sandbox import protocol
from evalkit.sandbox import reference_protocol as rp
from evalkit.sandbox.reply_reading import decode_reply


@dataclass(frozen=True)
class Program:
    module: str
    decode: Callable[[bytes], Any]
    exit_request: Callable[[], Any]


ANSWER_WORKER = Program("evalkit.sandbox.untrusted.worker", decode_reply,
                        lambda: protocol.simple_request(protocol.Op.EXIT))
REFERENCE_WORKER = Program(rp.WORKER_MODULE, rp.decode_reply, lambda: rp.ReferenceRequest("exit"))
SETUP_REQUESTS = (protocol.SetupRequest, rp.ReferenceSetup)
