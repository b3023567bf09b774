"""The peer's assistant for the benchmark turn: the three tools of the project's benchmark turn, and a model
that answers instantly — three tool calls in its first answer, "Done." once it has their results — as the
project's `scripted:` model does in its own turn benchmark. django-ai-assistant discovers this module by its
name (`<app>/ai_assistants.py`), as its documentation describes."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from django_ai_assistant import AIAssistant, method_tool
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from . import work


class InstantToolCallingModel(BaseChatModel):
    """Asks for `calls` until the conversation holds tool results, then answers "Done."; no network, no wait."""

    calls: list[dict[str, Any]]

    @property
    def _llm_type(self) -> str:
        return "instant-tool-calling"

    def bind_tools(
        self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        # What a provider's chat model does (ChatOpenAI among them): each tool becomes its JSON schema, sent
        # with every call. This model does not read them; building them is part of a turn's cost.
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            answer = AIMessage(content="Done.")
        else:
            answer = AIMessage(content="", tool_calls=[
                {"name": call["name"], "args": call["arguments"], "id": f"call_{number}", "type": "tool_call"}
                for number, call in enumerate(self.calls)
            ])
        return ChatResult(generations=[ChatGeneration(message=answer)])


class TrackerAssistant(AIAssistant):
    id = "tracker_assistant"  # noqa: A003 - the peer's name for it
    name = "Tracker assistant"
    instructions = "You help people keep their projects' tasks. Use the tools to read and change them."
    model = "instant"
    # The calls the model asks for, set once by the benchmark: the peer builds its assistant inside
    # `create_message` from the user and request alone.
    scripted_calls: ClassVar[list[dict[str, Any]]] = []

    def get_llm(self) -> BaseChatModel:
        return InstantToolCallingModel(calls=self.scripted_calls)

    @method_tool
    def tracker_task_create(self, project: int, title: str) -> str:
        """Create a task in one of your projects."""
        return json.dumps(work.task_create(self._user, project=project, title=title))

    @method_tool
    def tracker_task_list(self, search: str) -> str:
        """List your open tasks whose title contains `search`."""
        return json.dumps(work.task_list(self._user, search=search), default=str)

    @method_tool
    def tracker_project_stats(self, pk: int) -> str:
        """Count a project's tasks by status, and how many open ones are overdue."""
        return json.dumps(work.project_stats(self._user, pk=pk))
