"""The reward service: ``evalkit serve``, an HTTP front on one ``Evaluator`` for RL loops in other processes
(``pip install 'evalkit[serve]'``; docs/rl.md)."""
