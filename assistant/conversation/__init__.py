"""The conversation: what a person does with their chats, from the panel's socket or another channel — send,
cancel, confirm, feedback, rename, delete (`services.py`), the answer to an agent's call (`agent_calls.py`), and
how long ended chats are kept (`retention.py`)."""
