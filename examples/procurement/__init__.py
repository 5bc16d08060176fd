"""The procurement example: a contract-compliance agent and the scenarios the demo triages.

``tracejudge demo`` loads this folder by path (it is not an installed package); see README.md.
"""

from .agent import AgentConfig, Retriever, Tracing, build_context, load_documents, run_agent
from .scenarios import Scenario, ScenarioRun, load_scenarios, model_rules, run_scenarios

__all__ = [
    "AgentConfig",
    "Retriever",
    "Scenario",
    "ScenarioRun",
    "Tracing",
    "build_context",
    "load_documents",
    "load_scenarios",
    "model_rules",
    "run_agent",
    "run_scenarios",
]
