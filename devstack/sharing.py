"""Several commands on one set of embedded servers: two `make test` at once (two checkouts' worth of work on one
machine, each with its own TEST_DATABASE_NAME and Redis database), or `make bench` beside `make test`.

Each `devstack exec` joins the servers' users when it starts them or finds them running, and leaves when its
command ends. The servers stay up while any user is left; the last to leave stops what any of them started, so
one command ending never takes the servers from under another that is still running. Joining (with the start)
and leaving (with the stop) hold one lock, so a command never finds the servers up just as the last user stops
them."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from typing import TypeVar

from devstack.services import Paths, Started

T = TypeVar("T")


@contextlib.contextmanager
def _locked(paths: Paths) -> Iterator[None]:
    paths.data.mkdir(parents=True, exist_ok=True)
    with (paths.data / "exec-users.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _state_file(paths: Paths) -> os.PathLike[str]:
    return paths.data / "exec-users.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(paths: Paths) -> tuple[list[int], Started]:
    try:
        with open(_state_file(paths)) as file:
            state = json.load(file)
        pids = [int(pid) for pid in state.get("pids", [])]
        started = Started(postgres=bool(state.get("postgres")), valkey=bool(state.get("valkey")))
    except (FileNotFoundError, ValueError, TypeError, AttributeError):
        return [], Started()
    # A user killed without leaving (SIGKILL, a crash) leaves no claim on the servers.
    return [pid for pid in pids if _alive(pid)], started


def _write(paths: Paths, pids: list[int], started: Started) -> None:
    with open(_state_file(paths), "w") as file:
        json.dump({"pids": pids, "postgres": started.postgres, "valkey": started.valkey}, file)


def join(paths: Paths, start: Callable[[], tuple[T, Started]]) -> T:
    """Start the servers where needed (`start`, returning what it started) and join their users."""
    with _locked(paths):
        result, started = start()
        pids, earlier = _read(paths)
        if not pids:
            earlier = Started()  # nobody uses them: whoever started them before has left them to us
        merged = Started(postgres=earlier.postgres or started.postgres, valkey=earlier.valkey or started.valkey)
        _write(paths, [*pids, os.getpid()], merged)
        return result


def leave(paths: Paths, stop: Callable[[Started], object]) -> None:
    """Leave the servers' users; the last one out stops (`stop`) what the users started."""
    with _locked(paths):
        pids, started = _read(paths)
        pids = [pid for pid in pids if pid != os.getpid()]
        if pids:
            _write(paths, pids, started)
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_state_file(paths))
        if started.postgres or started.valkey:
            stop(started)
