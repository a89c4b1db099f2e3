"""help() is useful: every public name of the package, and every public method and property of
its classes, has a docstring."""

from __future__ import annotations

import inspect
from typing import List

import crosstune as ct


def undocumented() -> List[str]:
    missing = []
    for name in ct.__all__:
        obj = getattr(ct, name)
        if not (getattr(obj, "__doc__", None) or "").strip():
            missing.append(name)
        if not inspect.isclass(obj):
            continue
        for attr, member in vars(obj).items():
            if attr.startswith("_"):
                continue
            doc = getattr(member, "__doc__", None)
            if isinstance(member, property):
                doc = member.fget.__doc__ if member.fget else None
            slots = getattr(obj, "__slots__", None)
            if isinstance(slots, dict) and attr in slots:
                doc = slots[attr]  # what help() shows for a slot
            if not (doc or "").strip():
                missing.append(f"{name}.{attr}")
    return missing


def test_every_public_name_and_member_has_a_docstring() -> None:
    assert undocumented() == []


def test_help_on_tune_names_its_options() -> None:
    doc = inspect.getdoc(ct.tune) or ""
    for option in ("template", "workload", "Model", "tracker", "trials", "progress", "Ctrl-C"):
        assert option in doc
