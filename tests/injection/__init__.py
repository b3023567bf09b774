"""The injection suite: text another member wrote, planted where the assistant reads it, asking for a write the
person never asked for; and the same kinds of work on the person's own text, which must go through untouched.

`cases.py` says what is planted and what each case's model does; `harness.py` runs a case through the panel's
socket or the AG-UI endpoint and judges what happened in the database. The tests (here) and the benchmark
(`benchmarks/bench_injection.py`) run the same cases.
"""
