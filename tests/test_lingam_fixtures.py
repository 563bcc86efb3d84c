"""The recorded lingam results (tests/fixtures/lingam/) and their stand-in (tests/lingam_oracle.py)."""

import sys
import types
import warnings

import numpy as np
import pytest

import lingam_oracle
from lingam_oracle import FIXTURES, LINGAM_VERSION, Store, lingam_module


def test_fixtures_are_small_and_lingam_1_13s():
    files = sorted(FIXTURES.glob("*.json.gz"))
    assert files, "no recorded lingam results: run tools/record_lingam_fixtures.py"
    assert sum(f.stat().st_size for f in files) < 2 << 20
    for f in files:
        doc = lingam_oracle.read(f)
        assert doc["lingam"] == LINGAM_VERSION
        assert doc["entries"], f


def _fake_package():
    """A stand-in for lingam: a module with a model class, a function and errors."""
    mod = types.ModuleType("fakelingam")

    class Model:
        def __init__(self, scale=1.0):
            self.scale = scale

        def fit(self, X):
            self.coef_ = self.scale * np.asarray(X).sum(axis=0)
            self.order_ = [int(i) for i in np.argsort(self.coef_)]
            return self

        def summary(self):
            warnings.warn("a note from lingam", UserWarning)
            return {"n": len(self.order_), "first": self.order_[0]}

    def check(x):
        if x < 0:
            raise ValueError(f"negative: {x}")
        return np.float64(x) * 2

    Model.__module__ = "fakelingam"
    check.__module__ = "fakelingam"
    mod.Model, mod.check = Model, check
    return mod


def _use(lm, X):
    m = lm.Model(scale=2.0).fit(X)
    coef, order = m.coef_, m.order_
    with pytest.warns(UserWarning, match="a note from lingam"):
        summary = m.summary()
    with pytest.raises(ValueError, match="negative: -1"):
        lm.check(-1)
    return coef, order, summary, lm.check(3)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    mod = _fake_package()
    monkeypatch.setitem(sys.modules, "fakelingam", mod)
    monkeypatch.setattr(lingam_oracle, "PACKAGE", "fakelingam")
    monkeypatch.setattr(lingam_oracle, "FIXTURES", tmp_path)
    monkeypatch.setattr(Store, "all", {})
    return mod


def _stand(mode, owner="owner"):
    store = Store.of(owner)
    store.mode = mode
    live = sys.modules["fakelingam"] if mode != "replay" else None
    return store, lingam_oracle._Stand(store, "fakelingam", live, module=True)


def test_record_then_replay_gives_the_same_results_warnings_and_errors(fake):
    X = np.random.default_rng(0).normal(size=(20, 4))
    store, lm = _stand("record")
    live = _use(lm, X)
    store.save()
    Store.all.clear()
    store, lm = _stand("replay")  # read back from the file
    replayed = _use(lm, X + 1e-14)  # last-bit changes of the inputs find the same key
    np.testing.assert_array_equal(replayed[0], live[0])
    assert replayed[1] == live[1] and replayed[2] == live[2] and replayed[3] == live[3]
    with pytest.raises(pytest.fail.Exception, match="no recorded lingam result"):
        lm.Model(scale=3.0).fit(X)  # never recorded


def test_live_runs_check_the_fixtures(fake):
    X = np.random.default_rng(1).normal(size=(10, 3))
    store, lm = _stand("record")
    _use(lm, X)
    store.save()
    Store.all.clear()
    store, lm = _stand("live")
    _use(lm, X)  # the live results equal the recorded ones
    original = fake.Model.fit

    def drifted(self, X):
        original(self, X)
        self.coef_ = self.coef_ * (1 + 1e-5)
        return self

    fake.Model.fit = drifted
    m = lm.Model(scale=2.0).fit(X)
    with pytest.raises(AssertionError, match="differs from its fixture"):
        m.coef_


def test_lingam_module_replays_without_lingam(monkeypatch):
    monkeypatch.delenv(lingam_oracle.ENV, raising=False)  # (CI sets it to "live")
    monkeypatch.setattr(lingam_oracle, "_lingam_version", lambda: None)
    monkeypatch.setattr(Store, "all", {})
    assert lingam_oracle.mode() == "replay"
    lm = lingam_module("lingam", "test_estimator")
    assert object.__getattribute__(lm, "_live") is None
    monkeypatch.setenv(lingam_oracle.ENV, "live")  # CI: a missing lingam is an error
    with pytest.raises(RuntimeError, match="needs lingam 1.13.0"):
        lingam_oracle.mode()
