"""The settings' routing section (serve/settings/routing.py) is written out field by field: it must
keep one optional field per field of ``retrieval.routing.RoutingSettings``, in the dataclass' order,
of the dataclass' type or null, and an unset field must leave the built-in (or file) value."""

from __future__ import annotations

from dataclasses import fields
from typing import get_type_hints

from steadyrank.retrieval.routing import RoutingSettings
from steadyrank.serve.settings import RoutingSection, load_settings

OWN = ["route", "file", "disable"]  # the section's own fields, before the policy's


def test_the_section_has_every_policy_field_in_order_typed_as_the_policy_or_null() -> None:
    hints = get_type_hints(RoutingSettings)
    policy = [f.name for f in fields(RoutingSettings)]
    assert list(RoutingSection.model_fields) == OWN + policy
    for name in policy:
        info = RoutingSection.model_fields[name]
        assert info.annotation == (hints[name] | None), name
        assert info.default is None, name
        assert info.description and info.description.endswith(")") and "(default " in info.description, name


def test_unset_fields_keep_the_policy_and_set_ones_override_it() -> None:
    assert load_settings({}).routing_policy() == RoutingSettings()
    policy = load_settings({"routing": {"k_low": 20, "margin_below": 0.1, "disable": ["entropy"]}}).routing_policy()
    assert (policy.k_low, policy.margin_below, policy.entropy_above) == (20, 0.1, None)
    assert policy.k_high == RoutingSettings().k_high
