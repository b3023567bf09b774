"""Helpers for a host project's own tests of its assistant, as `django_htmx.testing` is for htmx.

- `assistant.testing.providers`: fake OpenAI-compatible and Anthropic servers on loopback, which check
  request bodies the way the real APIs would refuse them, record every request and answer with queued
  replies (`openai_completion`, `openai_stream`, `anthropic_message`, `anthropic_stream`, `error_reply`);
  `provider_settings` makes an `ASSISTANT` settings dict with short failover timings.
- `assistant.testing.scripted`: `write_script` writes a scripted model's script and returns the model
  spec (`scripted:PATH`) to put in `ASSISTANT["MODEL"]` or `ASSISTANT_MODEL`.
- `assistant.testing.sockets`: a signed-in person's socket on the host's own `ASGI_APPLICATION`
  (`connect`, `signed_in_client`), reading it until an event (`receive_until`) or until everything sent
  its way has arrived (`settle`). It imports channels' testing tools, so it is a module of its own.
- `assistant.testing.worker`: `WorkerProcess`, a real `celery -A <project> worker` for the test database,
  which a test may stop, kill as a crash would, or restart; `ServiceProcess`, its base, for other servers.

Nothing here is imported by the assistant itself: `import assistant` stays as cheap as it was.
"""
