"""The store: SQLModel tables and the SQLite engine. The bottom room: imports nothing from kernelsearch."""
from kernelsearch.store.database import DEFAULT_DB, open_store, session_scope
from kernelsearch.store.models import Evaluation, Idea, Kernel, LLMCall, ModelProblem, ModelRun, Run

__all__ = ["DEFAULT_DB", "Evaluation", "Idea", "Kernel", "LLMCall", "ModelProblem", "ModelRun", "Run", "open_store",
           "session_scope"]
