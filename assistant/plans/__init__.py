"""Plans: for a request of several steps, the run says what it means to do before it acts, follows it step by
step in the open, and plans again when a step fails (see record.py for the rules, offer.py for the tool)."""
