"""The conversation: what a person does with their chats, from the panel's socket or another channel — send,
cancel, confirm (a card of another channel as its policy says: assistant/channel_policies.py), feedback, rename,
delete (`services.py`; a send from the panel's socket, `socket_send.py`), what the panel loads of them
(`reads.py`), and how long ended chats are kept (`retention.py`)."""
