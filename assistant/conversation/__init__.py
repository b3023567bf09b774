"""The conversation: what a person does with their chats, from the panel's socket or another channel — send,
cancel, confirm, feedback, rename, delete (`services.py`; a send from the panel's socket, `socket_send.py`), what
the panel loads of them (`reads.py`), the answer to an agent's call (`agent_calls.py`), and how long ended chats
are kept (`retention.py`)."""
