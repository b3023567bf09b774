"""Files the person gives the assistant: stored for them alone, sent with one of their messages, read by the model as
data, and handed to a tool's view as the file field of its form (docs/tools.md, "Files")."""
