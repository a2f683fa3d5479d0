"""A test whose call into graded code ran out of budget runs once more, in a fresh child, before it fails.

Budgets are CPU time (:mod:`mini_vllm.sandbox.budget`), so load alone does not make a call run
out; the retry is there for what is left (a child that lost its caches, a kernel that counted a
little more), so that a grade never rests on one measurement. Only the second attempt's result
counts, and only it is reported. A call that ran out in a test and again in its retry does hang:
its later timeouts fail their tests at once, so code that hangs everywhere costs one budget per
test, not two.
"""

from __future__ import annotations

from typing import Any

import pytest
from _pytest.runner import runtestprotocol

TIMED_OUT = pytest.StashKey[Any]()


def _sandbox() -> Any:
    import sys

    return sys.modules.get("mini_vllm.sandbox.remote")  # None: nothing was sandboxed, nothing to retry


class RetryOnTimeout:
    """The pytest plugin (conftest.py registers it)."""

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        remote = _sandbox()
        if remote is not None:
            remote.reset_costs()  # a grading's call costs are its own (several gradings may share a process)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        remote = _sandbox()
        if remote is not None and call.excinfo is not None and isinstance(call.excinfo.value, remote.CallTimeout):
            item.stash[TIMED_OUT] = call.excinfo.value
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool:
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = self._attempt(item, nextitem)
        timeout = item.stash.get(TIMED_OUT, None)
        if timeout is not None and timeout.retry:
            remote = _sandbox()
            remote.renew_after_timeout(again=False)
            grader = item.config.pluginmanager.get_plugin("course-grader")
            if grader is not None:
                grader.forget(item.nodeid)  # only the retry's verdict counts
            reports = self._attempt(item, nextitem)
            again = item.stash.get(TIMED_OUT, None)
            if again is not None and again.label == timeout.label:
                remote.renew_after_timeout(again=True)
        for report in reports:
            item.ihook.pytest_runtest_logreport(report=report)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    @staticmethod
    def _attempt(item: pytest.Item, nextitem: pytest.Item | None) -> list[pytest.TestReport]:
        item.stash[TIMED_OUT] = None
        remote = _sandbox()
        if remote is not None:
            remote.begin_test()
        return runtestprotocol(item, nextitem=nextitem, log=False)
