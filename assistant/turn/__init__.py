"""The turn: what a Celery worker does with one run (context, memory, the tool loop, its lease and sweep)."""
