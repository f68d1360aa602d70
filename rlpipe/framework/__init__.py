"""The pipeline engine: task, contexts and middleware."""
from rlpipe.framework.context import Context, OfflineRLContext, OnlineRLContext
from rlpipe.framework.task import Role, Task, role_gated, task

__all__ = ["Context", "OfflineRLContext", "OnlineRLContext", "Role", "Task", "role_gated", "task"]
