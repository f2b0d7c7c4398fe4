"""The fork-server protocol's Job (_guard/_job.py): what a child is asked is typed, so a caller's
mistake is an error in the guard, before any child runs, not a KeyError in a child."""

import pickle

import pytest

from driftscope._guard._job import Job

BASE = dict(backend="ort", model="m.onnx", samples=[], runs=0, seed=0, work="/tmp/w")


def test_a_misspelt_field_is_refused_in_the_guard():
    with pytest.raises(TypeError, match="ref_dmup"):
        Job(**BASE, kind="fallback", ref_dmup="ref.tdump")


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="'bisekt' is not one of run, bisect, bisect_torch, fallback"):
        Job(**BASE, kind="bisekt")


def test_a_job_crosses_the_pickle_whole():
    job = Job(**BASE, kind="bisect_torch", leaves=("a", "b"), ops={"a": "Linear"},
              thresholds={"min_cosine": 0.99})
    back = pickle.loads(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
    assert back == job and back.state == {} and back.record is None
