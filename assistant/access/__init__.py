"""Access: as whom a run acts, and for how long — the session (or token) a run was sent from, checked before and
during its work (`authority.py`), the sockets closed when their session ends without a signal (`session_watch.py`),
and the session key kept only digested and sealed (`session_keys.py`)."""
