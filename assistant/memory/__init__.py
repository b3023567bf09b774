"""Memory: what the assistant remembers of each owner across conversations — stored, recalled by embedding, and
indexed per owner once they have many (`store.py`)."""
