"""`driftscope compare` from the outside: exact stdout and exit codes for the cases in
tests/cli/compare/expected/, usage errors, colour, and the JSON report validated against
docs/report-schema.json.

The binary is $DRIFTSCOPE_BIN (default build/dev/driftscope). Regenerate the expected outputs after
an intended change with DS_UPDATE_GOLDEN=1 and review the diff.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CASES = os.path.join(ROOT, "tests", "cli", "compare")
sys.path.insert(0, CASES)
import fixtures  # noqa: E402

BIN = os.path.abspath(os.environ.get("DRIFTSCOPE_BIN", os.path.join(ROOT, "build", "dev", "driftscope")))
UPDATE = os.environ.get("DS_UPDATE_GOLDEN") == "1"

pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    d = tmp_path_factory.mktemp("compare")
    fixtures.write_all(str(d))
    return d


def run(dumps, *args, env=None):
    e = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")}
    e["COLUMNS"] = "100"
    if env:
        e.update(env)
    return subprocess.run([BIN, "compare", *args], cwd=dumps, capture_output=True, text=True,
                          env=e, timeout=60)


# name, arguments, exit code
GOLDEN = [
    ("pass", ["ref.tdump", "same.tdump"], 0),
    ("scaled", ["ref.tdump", "scaled.tdump"], 1),
    ("scaled_all", ["ref.tdump", "scaled.tdump", "--all"], 1),
    ("scaled_quiet", ["ref.tdump", "scaled.tdump", "-q"], 1),
    ("scaled_stop", ["ref.tdump", "scaled.tdump", "--stop-at-first", "-q"], 1),
    ("zeroed", ["ref.tdump", "zeroed.tdump"], 3),
    ("nan_quiet", ["ref.tdump", "nan.tdump", "-q"], 3),
    ("partial", ["ref.tdump", "partial.tdump"], 1),
    ("partial_allowed", ["ref.tdump", "partial.tdump", "--allow-unpaired", "-q"], 0),
    ("renamed_unmapped", ["ref.tdump", "renamed.tdump", "-q"], 1),
    ("renamed_mapped", ["ref.tdump", "renamed.tdump", "--map-b", r"^/(\w+)/(\d+)/output_0$=>$1.$2", "-q"], 0),
    ("positional", ["ref.tdump", "renamed.tdump", "--pairs", "positional", "-q"], 0),
    ("cosine_only", ["ref.tdump", "scaled.tdump", "--min-cosine", "0.5", "-q"], 0),
]


@pytest.mark.parametrize("name,args,code", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_output(dumps, name, args, code):
    r = run(dumps, *args)
    path = os.path.join(CASES, "expected", name + ".stdout")
    if UPDATE:
        with open(path, "w") as f:
            f.write(r.stdout)
    with open(path) as f:
        expected = f.read()
    assert r.stdout == expected
    assert r.returncode == code, r.stderr
    assert r.stderr == ""  # no progress bar when stderr is not a terminal


def test_summary_line_comes_first(dumps):
    r = run(dumps, "ref.tdump", "scaled.tdump")
    first = r.stdout.splitlines()[0]
    assert first.startswith("DIVERGED: first divergence at layers.3 (index 3, Layer)")


@pytest.mark.parametrize("args,needle", [
    (["ref.tdump", "missing.tdump"], "candidate 'missing.tdump'"),
    (["ref.tdump", "same.tdump", "--policy", "nope.toml"], "nope.toml"),
    (["ref.tdump", "same.tdump", "--map-a", "no-arrow"], "compare option 'map_a': rename rule 'no-arrow'"),
    (["ref.tdump", "same.tdump", "--pairs", "sideways"], "sideways"),
    (["ref.tdump", "same.tdump", "--min-cosine", "2"], "'min_cosine' is 2"),
    (["ref.tdump", "same.tdump", "--r64-k", "f16"], "'r64_k' entry 'f16'"),
    (["ref.tdump", "same.tdump", "--max-mismatch-fraction", "0.1"], "'atol' or 'rtol'"),
    (["ref.tdump", "same.tdump", "--filter", "rank=?"], "filter"),
    (["ref.tdump"], "CANDIDATE"),
])
def test_usage_errors_exit_2_with_one_line(dumps, args, needle):
    r = run(dumps, *args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("driftscope: error:")
    assert needle in lines[0]


def test_bad_policy_names_line(dumps):
    (dumps / "bad.toml").write_text("[[rule]]\nmatch = \"x\"\nmin_cosine = 7\n")
    r = run(dumps, "ref.tdump", "same.tdump", "--policy", "bad.toml")
    assert r.returncode == 2
    assert "bad_policy" in r.stderr and "'min_cosine' is 7" in r.stderr


def test_policy_file_rule_decides(dumps):
    (dumps / "loose.toml").write_text(
        '[[rule]]\nmatch = "layers.*"\nmin_cosine = 0.5\n')
    r = run(dumps, "ref.tdump", "scaled.tdump", "--policy", "loose.toml", "-q")
    assert r.returncode == 0, r.stdout
    (dumps / "loose.json").write_text('{"rules": [{"match": "layers.[0-3]", "min_cosine": 0.5}]}')
    r = run(dumps, "ref.tdump", "scaled.tdump", "--policy", "loose.json", "-q")
    assert r.returncode == 1
    assert r.stdout.startswith("DIVERGED: first divergence at layers.4 ")


def test_colour_only_when_asked_or_tty(dumps):
    plain = run(dumps, "ref.tdump", "scaled.tdump")
    assert "\x1b[" not in plain.stdout
    always = run(dumps, "ref.tdump", "scaled.tdump", "--color", "always")
    assert "\x1b[1;31mDIVERGED" in always.stdout
    never = run(dumps, "ref.tdump", "scaled.tdump", "--color", "never", env={"NO_COLOR": "1"})
    assert "\x1b[" not in never.stdout


def test_width_follows_columns(dumps):
    narrow = run(dumps, "ref.tdump", "scaled.tdump", env={"COLUMNS": "60"})
    wide = run(dumps, "ref.tdump", "scaled.tdump", env={"COLUMNS": "160"})
    table = lambda out: [l for l in out.splitlines() if l.startswith(">")]  # noqa: E731
    assert table(narrow.stdout) and table(wide.stdout)
    assert "Layer" not in table(narrow.stdout)[0]  # the op column is dropped when narrow
    assert "Layer" in table(wide.stdout)[0]


def _validate(doc):
    jsonschema = pytest.importorskip("jsonschema")
    with open(os.path.join(ROOT, "docs", "report-schema.json")) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)


@pytest.mark.parametrize("cand,verdict,code", [
    ("same.tdump", "pass", 0), ("scaled.tdump", "diverged", 1), ("zeroed.tdump", "silent_failure", 3),
    ("nan.tdump", "silent_failure", 3), ("partial.tdump", "diverged", 1), ("renamed.tdump", "diverged", 1),
])
def test_json_report_matches_schema(dumps, cand, verdict, code):
    r = run(dumps, "ref.tdump", cand, "--json", "-")
    assert r.returncode == code
    doc = json.loads(r.stdout)
    _validate(doc)
    assert doc["schema"] == "driftscope.compare.report/1"
    assert doc["verdict"] == verdict
    assert doc["exit_code"] == code
    assert len(doc["tensors"]) == doc["counts"]["pairs"]


def test_json_first_divergence_fields(dumps):
    out = dumps / "scaled.json"
    md = dumps / "scaled.md"
    r = run(dumps, "ref.tdump", "scaled.tdump", "--json", str(out), "--markdown", str(md), "-q")
    assert r.returncode == 1
    doc = json.loads(out.read_text())
    _validate(doc)
    fd = doc["first_divergence"]
    assert fd["name"] == "layers.3" and fd["occurrence"] == 0
    assert fd["index_ref"] == 3 and fd["index_cand"] == 3
    assert fd["status"] == "fail" and fd["origin"] == "introduced" and fd["basis"] == "predecessor"
    assert fd["reasons"][0]["code"] == "sqnr"
    assert fd["rel_l2"] == pytest.approx(0.5, rel=1e-6)
    assert fd["amplification"] == "inf"
    later = [t for t in doc["tensors"] if t["index_ref"] > 3 and t["status"] != "pass"]
    assert later and all(t["origin"] == "inherited" for t in later)
    assert [g["name"] for g in doc["error_growth"]] == [f"layers.{i}" for i in range(6)]
    assert doc["amplifiers"][0]["name"] == "layers.3"
    assert doc["first_nonfinite"] is None and doc["first_silent_zero"] is None
    text = md.read_text()
    assert text.startswith("## \u274c driftscope compare: diverged\n")
    assert "### First divergence: `layers.3`" in text


def test_json_zero_is_never_cosine_one(dumps):
    r = run(dumps, "ref.tdump", "zeroed.tdump", "--json", "-")
    doc = json.loads(r.stdout)
    z = doc["first_silent_zero"]
    assert z["name"] == "layers.2"
    assert z["cosine"] == 0
    assert z["reasons"][0]["code"] == "all_zero"
    assert doc["first_divergence"]["name"] == "layers.2"


def test_json_nan(dumps):
    doc = json.loads(run(dumps, "ref.tdump", "nan.tdump", "--json", "-").stdout)
    assert doc["first_nonfinite"]["name"] == "layers.4"
    assert doc["first_nonfinite"]["nan_cand"] == 1 and doc["first_nonfinite"]["nan_ref"] == 0
    assert doc["first_nonfinite"]["error"] == "inf"


def test_help_has_examples():
    r = subprocess.run([BIN, "compare", "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    for s in ("Examples:", "--reference64", "--map-a", "--stop-at-first", "Exit status"):
        assert s in r.stdout


def test_thread_count_does_not_change_report(dumps):
    outs = {run(dumps, "ref.tdump", "scaled.tdump", "--json", "-", "-j", str(t)).stdout for t in (1, 2, 8)}
    assert len(outs) == 1


def test_reference64_rule(dumps):
    # A float16 run judged by what float32 achieves against float64, with k = 3 for f16.
    r = run(dumps, "ref.tdump", "half.tdump", "--reference64", "ref64.tdump", "--json", "-")
    doc = json.loads(r.stdout)
    _validate(doc)
    assert doc["reference64"]["path"] == "ref64.tdump"
    first = doc["tensors"][0]
    assert first["criteria"]["source"] == "reference64 rule"
    assert first["reference64"]["k"] == 3.0
    # float16 rounds every op: its error against float64 soon exceeds 3x float32's plus one
    # float16 rounding (the default floor), so by this strict rule the run diverges.
    assert r.returncode == 1
    r = run(dumps, "ref.tdump", "same.tdump", "--reference64", "ref64.tdump", "-q")
    assert r.returncode == 0, r.stdout
    # Scaling op 3 by 1.5 is far outside what float32 does: fails there.
    r = run(dumps, "ref.tdump", "scaled.tdump", "--reference64", "ref64.tdump", "-q")
    assert r.returncode == 1
    assert r.stdout.startswith("DIVERGED: first divergence at layers.3 ")
    # A huge k makes the rule pass the float16 run everywhere.
    r = run(dumps, "ref.tdump", "half.tdump", "--reference64", "ref64.tdump", "--r64-k", "f16=1e9", "-q")
    assert r.returncode == 0, r.stdout
    r = run(dumps, "ref.tdump", "half.tdump", "--reference64", "missing.tdump")
    assert r.returncode == 2 and "reference64" in r.stderr


def test_float16_run_judged_by_float16_default(dumps):
    r = run(dumps, "ref.tdump", "half.tdump", "-q")
    assert r.returncode == 0, r.stdout
    r = run(dumps, "ref.tdump", "half.tdump", "--min-sqnr", "120", "-q")
    assert r.returncode == 1


def test_argmax_criterion(dumps):
    r = run(dumps, "logits_a.tdump", "logits_b.tdump", "--classes", "head", "--min-argmax", "0.9", "--json", "-")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    t = doc["tensors"][0]
    assert t["argmax_agreement"] == 0.75 and t["reasons"][0]["code"] == "argmax"
    r = run(dumps, "logits_a.tdump", "logits_b.tdump", "--min-argmax", "0.75", "-q")
    assert r.returncode == 0


def test_policy_skip_and_markdown_file(dumps):
    (dumps / "skip.toml").write_text('[[rule]]\nmatch = "layers.[3-5]"\nskip = true\n')
    md = dumps / "summary.md"
    r = run(dumps, "ref.tdump", "scaled.tdump", "--policy", "skip.toml", "--markdown", str(md), "-q")
    assert r.returncode == 0, r.stdout
    assert md.read_text().startswith("## \u2705 driftscope compare: pass\n")
    doc = json.loads(run(dumps, "ref.tdump", "scaled.tdump", "--policy", "skip.toml", "--json", "-").stdout)
    assert doc["counts"]["skipped"] == 3


def test_repeatable_options_take_one_value_each(dumps):
    # `--map-b RULE REF CAND`: the rule option must not swallow the positionals.
    r = run(dumps, "--map-b", r"^/(\w+)/(\d+)/output_0$=>$1.$2", "--map-b", "^nothing$=>x",
            "ref.tdump", "renamed.tdump", "-q")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "PASS: 6 tensor pairs within tolerance (all identical)\n"
