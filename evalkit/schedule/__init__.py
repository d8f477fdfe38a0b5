"""Trusted. What runs where and when: moving submissions through triage, builds and judges, and writing
each row as it is decided. Decides no verdict and computes no score."""
