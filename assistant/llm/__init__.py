"""Language models behind one small protocol: `get_model().call_tools(messages, tools)`.

Providers are chosen by ASSISTANT["MODEL"] (env ASSISTANT_MODEL): `offline` (the default demo
model), `scripted:PATH`, `openai:MODEL`, `anthropic:MODEL`, or `NAME:MODEL` for an entry of
ASSISTANT["PROVIDERS"]; a comma-separated list is a failover chain.
"""

from __future__ import annotations

from .errors import (
    AllProvidersFailedError,
    ModelConfigurationError,
    ModelError,
    ProviderError,
    ScriptExhaustedError,
)
from .factory import get_model
from .types import (
    ChatModel,
    Message,
    ModelResponse,
    Picture,
    TextDeltaCallback,
    Tool,
    ToolCall,
    ToolSpec,
    Usage,
)

OFFLINE_MODEL_NAME = "offline-demo"

__all__ = [
    "OFFLINE_MODEL_NAME",
    "AllProvidersFailedError",
    "ChatModel",
    "Message",
    "Picture",
    "ModelConfigurationError",
    "ModelError",
    "ModelResponse",
    "ProviderError",
    "ScriptExhaustedError",
    "TextDeltaCallback",
    "Tool",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "get_model",
]
