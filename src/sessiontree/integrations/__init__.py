"""Integrations with other agent frameworks, each behind its own extra.

* :mod:`sessiontree.integrations.openai_agents`: a ``Session`` for the OpenAI Agents SDK
  (``pip install 'sessiontree[agents]'``).
* :mod:`sessiontree.integrations.claude_agent_sdk`: a ``SessionStore`` for the Claude Agent
  SDK (``pip install 'sessiontree[claude]'``).

Nothing is imported here, so ``import sessiontree`` never pulls in a framework.
"""

from __future__ import annotations

__all__: list[str] = []
