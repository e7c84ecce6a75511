"""Framework adapters over :mod:`saihm.client` (issue 15 item 6), each an optional extra.

- ``saihm.integrations.langchain`` (``pip install 'saihm[langchain]'``): a LangChain
  ``BaseRetriever`` over ``saihm_recall`` and a ``BaseChatMessageHistory`` over the record.
- ``saihm.integrations.langgraph`` (``pip install 'saihm[langgraph]'``): a LangGraph
  ``BaseStore`` whose items are memory cells.
- ``saihm.integrations.llamaindex`` (``pip install 'saihm[llamaindex]'``): a LlamaIndex
  ``BaseMemory`` over the record and a ``BaseMemoryBlock`` over memory cells.
- ``saihm.integrations.openai_agents`` (``pip install 'saihm[openai-agents]'``): an OpenAI
  Agents SDK ``Session`` over the record.

Each takes a token's ``Authorization`` value, or ``admin=`` (a :class:`saihm.client.Admin`)
with a session and a holder or user, opened through the authority service
(:mod:`saihm.integrations.identity`).

Adapters hold no keys: they hold an endpoint and an ``Authorization`` value and call the
operator through the client library (tests/test_layers.py). Nothing is imported
here, so a missing framework fails only when its adapter is imported, with one line naming the
extra (:func:`require`). See docs/integrations.md, "Framework adapters".
"""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, extra: str) -> ModuleType:
    """``module`` imported, or ``ImportError`` with the one-line install hint for ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{module} is not installed: pip install 'saihm[{extra}]'") from err
