"""The pipeline engine: task, contexts and middleware."""
from rlpipe.framework.context import Context, OfflineRLContext, OnlineRLContext
from rlpipe.framework.task import Role, Task, call_middleware, role_gated, task

__all__ = [
    "Context", "OfflineRLContext", "OnlineRLContext", "Role", "Task", "call_middleware", "role_gated", "task",
]
