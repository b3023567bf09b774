"""Infrastructure below every room, knowing nothing of runs or chats: the assistant's Redis connection
(`redis_connection.py`), the Celery broker transport a host names in its settings (`broker.py`), and text a
person typed made readable as typed (`text.py`, also used by a host's forms)."""
