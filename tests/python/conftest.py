"""Shared pytest policy: under `make test` a skipped test is a failure.

Tests use pytest.importorskip for optional runtimes so that a developer without, say, LiteRT can
still run the rest; but `make test` installs every dependency, so there a skip can only mean
missing work or a broken install, and it must not pass silently.
"""
import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("DRIFTSCOPE_NO_SKIPS") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped:
        for report in skipped:
            reporter.write_line(f"driftscope: skipped under make test: {report.nodeid}: {report.longrepr}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
