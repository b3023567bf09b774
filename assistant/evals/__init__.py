"""Evals: change the model, the instructions or a spec and see what regressed (an optional sub-app).

A host adds `"assistant.evals"` to `INSTALLED_APPS` (after `"assistant"`). Staff make **eval sets** out of
recorded runs — the admin's run list has the action, `manage.py assistant_eval add SET RUN_ID...` the same —
and a **case** keeps what its run was asked, the conversation before it, the spec and the person it ran as,
every step it took (each tool call with its arguments and result, a member's run as its tree) and the reply,
with what a replay of it is expected to do. Sets are evidence like runs: read-only unless `EVALS_EDITABLE`,
and exported and imported as JSON so a team keeps them in its repository.
"""
