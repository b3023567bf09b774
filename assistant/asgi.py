"""`with_assistant()`: a project's ASGI application with the assistant's websocket added.

In the project's `asgi.py`, the line Django wrote, `application = get_asgi_application()`, becomes:

    from assistant.asgi import with_assistant

    application = with_assistant(get_asgi_application())

This module can be imported before Django is set up (as `asgi.py` does, above the settings line);
Channels' session and auth parts are imported only when `with_assistant()` is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["with_assistant"]

ASGIApp = Any


def with_assistant(application: ASGIApp, *, websocket_routes: Sequence[Any] = ()) -> ASGIApp:
    """HTTP as `application` serves it; websockets at the assistant's path (and `websocket_routes`)
    behind an Origin check against ALLOWED_HOSTS and the Django session's user.

    `application` is the project's Django ASGI app (`get_asgi_application()`), or a Channels
    `ProtocolTypeRouter` the project already has: its HTTP app and any other protocol are kept, and a
    websocket it already routes is kept for every path the assistant's routes do not match, behind
    whatever validation it already had. `websocket_routes` are more `path()`/`re_path()` entries to
    serve behind the same Origin check and session auth as the assistant's own.
    """
    # Imported when called, once the project's asgi.py has set Django up: these import the models (and Channels'
    # auth the user model), which Django refuses to load before, when that asgi.py imports this module.
    from channels.auth import AuthMiddlewareStack
    from channels.routing import ProtocolTypeRouter, URLRouter
    from channels.security.websocket import AllowedHostsOriginValidator

    from assistant.operations.health import record_web_tools
    from assistant.routing import websocket_urlpatterns

    # The web process starts here: the workers compare the tools its code declares with theirs, so a worker
    # started before a tool was added says in its log that it must be restarted.
    record_web_tools()
    protocols: dict[str, ASGIApp]
    if isinstance(application, ProtocolTypeRouter):
        protocols = dict(application.application_mapping)
    else:
        protocols = {"http": application}
    routes = [*websocket_urlpatterns, *websocket_routes]
    ours = AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(routes)))
    theirs = protocols.get("websocket")
    protocols["websocket"] = ours if theirs is None else _WebsocketByPath(routes, ours, theirs)
    return ProtocolTypeRouter(protocols)


class _WebsocketByPath:
    """Sends a websocket whose path one of `routes` matches to `matched`, any other to `otherwise`.

    Matching first, rather than letting a URLRouter fail over, keeps each side's own middleware (origin
    check, auth) from running for the other's connections.
    """

    def __init__(self, routes: Sequence[Any], matched: ASGIApp, otherwise: ASGIApp) -> None:
        self.routes, self.matched, self.otherwise = list(routes), matched, otherwise

    def _is_ours(self, scope: dict[str, Any]) -> bool:
        path = str(scope.get("path_remaining", scope.get("path", "")))
        root_path = str(scope.get("root_path", ""))
        if "path_remaining" not in scope and root_path and path.startswith(root_path):
            path = path[len(root_path):]
        path = path.lstrip("/")
        return any(route.pattern.match(path) for route in self.routes)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        app = self.matched if self._is_ours(scope) else self.otherwise
        return await app(scope, receive, send)
