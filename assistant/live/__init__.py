"""Live: what a person's screens are told — the reads of their chats (`selectors.py`), rows as JSON payloads
(`payloads.py`), replies rendered as sanitised Markdown (`markdown.py`), and the numbered events that carry them
to every socket of that person (`events.py`)."""
