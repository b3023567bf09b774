"""Runs: one owner of a run's life that the socket's services and the worker's turn both call, so neither imports
the other — its start, end and profile filing (`lifecycle.py`, `profile.py`), the rows written together under
its lease (`rows.py`, `lease.py`), its cancel flag (`cancel_flags.py`), model output made storable
(`model_output.py`) and the settings of a replay (`replay.py`)."""
