"""The ``admission`` settings section, and the keys it took over from ``limits`` and ``quality``: a
settings file that still names them keeps working (same effective value, a warning naming the new
key); one that names a key both ways with different values is refused."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from steadyrank.serve.settings import AdmissionSettings, Settings, SettingsError, load_settings
from steadyrank.serve.settings.admission import LEGACY_KEYS

#: A valid value of each admission field that is not its default.
OTHER = {"max_in_flight": 12, "headroom": 2.5, "refusals_per_s": 7.0, "refusal_max_wait_s": 1.5,
         "shadow_chunk_docs": 9, "shadow_idle_s": 0.5, "shadow_max_wait_s": 3.0}


def test_every_field_has_another_value_and_a_legacy_key_maps_onto_each() -> None:
    assert set(OTHER) == set(AdmissionSettings.model_fields) == set(LEGACY_KEYS.values())
    assert all(OTHER[name] != info.default for name, info in AdmissionSettings.model_fields.items())


@pytest.mark.parametrize(("section", "key"), sorted(LEGACY_KEYS))
def test_a_legacy_key_sets_its_admission_field_with_a_warning_naming_it(section: str, key: str) -> None:
    new = LEGACY_KEYS[section, key]
    with pytest.warns(FutureWarning, match=rf"{section}\.{key} is deprecated; use admission\.{new}"):
        legacy = load_settings({section: {key: OTHER[new]}})
    assert getattr(legacy.admission, new) == OTHER[new]
    assert legacy.model_dump() == load_settings({"admission": {new: OTHER[new]}}).model_dump()


def test_a_settings_file_with_every_legacy_key_loads_as_its_admission_section(tmp_path: Path) -> None:
    old: dict[str, dict[str, object]] = {}
    for (section, key), new in LEGACY_KEYS.items():
        old.setdefault(section, {})[key] = OTHER[new]
    old["limits"]["max_documents"] = 30  # the sections keep their other keys
    old["quality"]["top_n"] = 20
    (tmp_path / "settings.yaml").write_text(yaml.safe_dump(old))
    with pytest.warns(FutureWarning) as caught:
        settings = load_settings(tmp_path / "settings.yaml")
    assert len(caught) == len(LEGACY_KEYS)
    assert settings.admission.model_dump() == OTHER
    assert settings.limits.max_documents == 30 and settings.quality.top_n == 20


def test_a_key_given_both_ways_with_different_values_is_an_error() -> None:
    with pytest.raises(SettingsError, match=r"limits\.admission_headroom \(2\.5\) and admission\.headroom \(0\.5\)"):
        load_settings({"limits": {"admission_headroom": 2.5}, "admission": {"headroom": 0.5}})
    with pytest.raises(SettingsError, match=r"quality\.shadow_idle_s .* admission\.shadow_idle_s"):
        load_settings({"quality": {"shadow_idle_s": 0.5}, "admission": {"shadow_idle_s": 1.0}})


def test_a_key_given_both_ways_with_one_value_is_taken_with_a_warning() -> None:
    with pytest.warns(FutureWarning, match=r"limits\.max_in_flight is deprecated"):
        settings = load_settings({"limits": {"max_in_flight": 12}, "admission": {"max_in_flight": 12,
                                                                                 "refusals_per_s": 3}})
    assert (settings.admission.max_in_flight, settings.admission.refusals_per_s) == (12, 3)


def test_a_legacy_value_is_checked_by_its_new_field() -> None:
    with pytest.warns(FutureWarning), pytest.raises(SettingsError, match=r"admission\.max_in_flight"):
        load_settings({"limits": {"max_in_flight": 0}})
    with pytest.warns(FutureWarning), pytest.raises(SettingsError, match=r"admission\.max_in_flight \(256\) must be <"):
        load_settings({"limits": {"max_in_flight": 256}})  # deployments.ingress.max_ongoing_requests is 256


def test_the_callers_mapping_is_not_changed() -> None:
    raw = {"limits": {"refusals_per_s": 7.0, "max_documents": 30}}
    with pytest.warns(FutureWarning):
        load_settings(raw)
    assert raw == {"limits": {"refusals_per_s": 7.0, "max_documents": 30}}


def test_the_new_keys_and_the_defaults_warn_of_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_settings({"admission": OTHER}).admission.model_dump() == OTHER
        assert Settings().admission == AdmissionSettings()


def test_an_unknown_admission_key_is_an_error() -> None:
    with pytest.raises(SettingsError, match=r"admission\.max_inflight"):
        load_settings({"admission": {"max_inflight": 3}})
