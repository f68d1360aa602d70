"""Semantics of the pipeline engine: order, wrap, finish, renew/keep, roles."""
from __future__ import annotations

import inspect

import pytest

from rlpipe.framework import OnlineRLContext, Role, Task, call_middleware, role_gated, task


def recorder(log: list[str], name: str, generator: bool):
    if generator:
        def mw(ctx):
            log.append(f"{name}>")
            yield
            log.append(f"{name}<")
    else:
        def mw(ctx):
            log.append(name)
    return mw


def test_backward_parts_run_in_reverse_after_all_forward_parts():
    log: list[str] = []
    t = Task()
    t.use(recorder(log, "a", True)).use(recorder(log, "b", False)).use(recorder(log, "c", True))
    t.run(max_step=2)
    assert log == ["a>", "b", "c>", "c<", "a<"] * 2


def test_wrap_returns_backward_callable_that_runs_once():
    log: list[str] = []
    t = Task()
    inner = t.wrap(recorder(log, "inner", True))

    def outer(ctx):
        back = inner(ctx)
        log.append("outer")
        back()
        back()  # a second call is a no-op

    t.use(outer)
    t.run(max_step=1)
    assert log == ["inner>", "outer", "inner<"]


def test_wrapped_backward_not_called_runs_at_end_of_iteration():
    log: list[str] = []
    t = Task()
    inner = t.wrap(recorder(log, "inner", True))
    t.use(lambda ctx: (inner(ctx), log.append("outer")))
    t.use(recorder(log, "last", True))
    t.run(max_step=1)
    assert log == ["inner>", "outer", "last>", "last<", "inner<"]


def test_generator_yielding_twice_is_an_error():
    def bad(ctx):
        yield
        yield

    t = Task()
    t.use(bad)
    with pytest.raises(RuntimeError, match="yielded more than once"):
        t.run(max_step=1)


def test_finish_stops_after_the_whole_iteration():
    log: list[str] = []
    t = Task()

    def stopper(ctx):
        log.append("stop")
        if ctx.total_step == 1:
            t.finish = True

    t.use(stopper).use(recorder(log, "after", False))
    t.run(max_step=10)
    assert log == ["stop", "after", "stop", "after"]
    assert t.ctx.finish


def test_renew_keeps_counters_and_resets_per_iteration_data():
    ctx = OnlineRLContext()
    ctx.env_step, ctx.train_iter, ctx.last_eval_value = 10, 3, 1.5
    ctx.train_data = {"x": 1}
    ctx.collect_kwargs["eps"] = 0.5
    ctx.custom = 7
    ctx.keep("custom")
    new = ctx.renew()
    assert (new.env_step, new.train_iter, new.last_eval_value, new.custom) == (10, 3, 1.5, 7)
    assert new.train_data is None and new.collect_kwargs == {}
    assert new.total_step == ctx.total_step + 1


def test_task_renews_context_between_iterations():
    seen = []
    t = Task()

    def mw(ctx):
        seen.append((ctx.train_data, ctx.env_step))
        ctx.train_data = "stale"
        ctx.env_step += 5

    t.use(mw)
    t.run(max_step=3)
    assert seen == [(None, 0), (None, 5), (None, 10)]


def test_use_wrapper_wraps_existing_and_later_middleware():
    calls: list[str] = []

    def wrapper(fn):
        def wrapped(ctx):
            calls.append("w")
            return fn(ctx)
        return wrapped

    t = Task()
    t.use(lambda ctx: calls.append("a"))
    t.use_wrapper(wrapper)
    t.use(lambda ctx: calls.append("b"))
    t.run(max_step=1)
    assert calls == ["w", "a", "w", "b"]


def test_start_resets_state_and_roles():
    with task.start():
        task.use(lambda ctx: None)
        task.add_role(Role.LEARNER)
        assert task.has_role(task.role.LEARNER)
        assert len(task.middleware) == 1
    assert task.middleware == [] and not task.has_role(Role.LEARNER) and not task.finish


def test_use_leaves_out_middleware_of_a_role_this_distributed_task_does_not_play(monkeypatch):
    collected = []

    @role_gated(Role.COLLECTOR)
    class Collector:
        def __init__(self, x):
            self.x = x

        def __call__(self, ctx):
            collected.append(self.x)

    t = Task()
    t.use(Collector(3))
    assert len(t.middleware) == 1  # one process: every middleware runs
    monkeypatch.setattr(type(t.router), "is_active", property(lambda self: True))
    learner_only = Task().add_role(Role.LEARNER)
    learner_only.use(Collector(3))
    assert learner_only.middleware == []
    collector = Task().add_role(Role.COLLECTOR)
    collector.use(Collector(4))
    collector.run(max_step=1)
    assert collected == [4]


def test_role_gated_keeps_the_class_signature():
    @role_gated(Role.LEARNER)
    class Learner:
        def __init__(self, cfg: int, policy: str) -> None:
            self.cfg = cfg

    assert list(inspect.signature(Learner).parameters) == ["cfg", "policy"]
    assert Learner(1, "p").cfg == 1 and Learner.middleware_role is Role.LEARNER


def test_finish_is_the_contexts_flag():
    t = Task()

    def stopper(ctx):
        ctx.finish = True

    t.use(stopper)
    t.run(max_step=5)
    assert t.ctx.total_step == 0 and t.finish  # stopped after the first iteration
    t.finish = False
    assert not t.ctx.finish


def test_a_second_task_runs_without_touching_the_module_task():
    with task.start():
        task.use(lambda ctx: None)
        other = Task()
        seen = []
        other.use(lambda ctx: seen.append(ctx.total_step))
        other.use(lambda ctx: setattr(ctx, "finish", ctx.total_step == 2))
        other.run()
        assert seen == [0, 1, 2] and other.finish
        assert len(task.middleware) == 1 and not task.finish and task.ctx.total_step == 0


def test_call_middleware_runs_forward_then_backward_when_asked():
    log = []

    def gen(ctx):
        log.append("forward")
        yield
        log.append("backward")

    finish = call_middleware(gen, OnlineRLContext())
    assert log == ["forward"]
    finish()
    finish()  # at most once
    assert log == ["forward", "backward"]
    call_middleware(lambda ctx: log.append("plain"), OnlineRLContext())()
    assert log[-1] == "plain"


def test_offline_context_keeps_epoch_and_iteration_counters():
    from rlpipe.framework import OfflineRLContext

    ctx = OfflineRLContext()
    ctx.train_epoch, ctx.train_iter, ctx.train_data = 2, 30, {"obs": 1}
    new = ctx.renew()
    assert (new.train_epoch, new.train_iter, new.train_data) == (2, 30, None)
