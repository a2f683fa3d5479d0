"""A lab module's public names and signatures, compared between a starter and its solution.

The instructor's suite compares the two files directly; the student's release has no solution,
so it compares the starter with a listing recorded from the solutions.
"""

from __future__ import annotations

import inspect
from types import ModuleType


def public_api(module: ModuleType) -> dict[str, str]:
    """Each public name a lab module defines, with its signature (methods of classes too)."""
    api: dict[str, str] = {}
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(value):
            api[name] = "class"
            fields = getattr(value, "__dataclass_fields__", None)
            if fields:
                api[f"{name} fields"] = ", ".join(f"{f.name}: {f.type}" for f in fields.values())
            for attr, member in vars(value).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                if isinstance(member, property):
                    api[f"{name}.{attr}"] = "property"
                elif callable(member) or isinstance(member, (staticmethod, classmethod)):
                    api[f"{name}.{attr}"] = str(inspect.signature(getattr(value, attr)))
        elif callable(value):
            api[name] = str(inspect.signature(value))
        else:
            api[name] = f"constant {value!r}"
    return api
