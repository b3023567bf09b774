"""Dictation: the panel's microphone records, the endpoint (`views.py`, `assistant:transcribe`) checks what it
was sent (`recording.py`) and counts it against the person's limit (`limits.py`), and the configured
transcription model turns it into text (`transcription.py`), which goes back to the panel's message box for the
person to check and send. Nothing of a recording is kept: it lives in memory for the length of the request."""
