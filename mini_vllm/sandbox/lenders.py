"""What one side of the sandbox's channel lets the other do with the objects it lends.

The child lends freely (:class:`Lender`: it is the student's process). The trusted side lends only
public methods of the objects the tests handed over, and never hands out a module, a class or a
function it was not given (:class:`StrictLender`), so no chain of attribute look-ups reaches the
grader's internals; an object that declares a ``sandbox_interface`` is served through its declared
methods only (:mod:`mini_vllm.sandbox.served`).
"""

from __future__ import annotations

import inspect
import types
from typing import Any

from mini_vllm.sandbox import served
from mini_vllm.sandbox.proxies import FORWARDED
from mini_vllm.sandbox.wire import WireError

UNSAFE_TYPES = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                types.CodeType, types.FrameType, types.TracebackType, types.GeneratorType)

class Lender:
    """What one side lets the other do with the objects it lends. The child lends freely."""

    strict = False

    def check_method(self, obj: Any, name: str | None) -> None:
        pass

    def check_attribute(self, obj: Any, name: str) -> None:
        pass

    def check_set(self, obj: Any, name: str) -> None:
        pass

    def check_result(self, value: Any) -> None:
        pass

    def call_path(self, path: list[str], args: list[Any], kwargs: dict[str, Any]) -> Any:
        raise WireError("nothing is served by path here")

    def check_open(self, obj: Any) -> None:
        pass

    def serve(self, obj: Any, method: Any, args: Any) -> Any:
        raise WireError("nothing is served through an interface here")


class StrictLender(Lender):
    """The trusted side: public methods of lent objects only; no module, class or function goes out."""

    strict = True

    def check_method(self, obj: Any, name: str | None) -> None:
        if name is None:
            if not callable(obj):
                raise TypeError("that object is not callable")
            return
        if (name.startswith("_") and name not in FORWARDED) or name.startswith("sandbox_"):
            raise AttributeError(f"{type(obj).__name__}.{name} is not public")
        member = inspect.getattr_static(type(obj), name, None)
        if not (inspect.isfunction(member) or isinstance(member, (staticmethod, classmethod))
                or inspect.ismethoddescriptor(member)):
            raise AttributeError(f"{type(obj).__name__} has no public method {name!r}")

    def check_attribute(self, obj: Any, name: str) -> None:
        if name.startswith("_"):
            raise AttributeError(f"{type(obj).__name__}.{name} is not public")

    def check_set(self, obj: Any, name: str) -> None:
        raise PermissionError(f"graded code cannot set {type(obj).__name__}.{name}: the tests' objects are read-only "
                              "to it (a counter, for one, must count what happened)")

    def check_result(self, value: Any) -> None:
        if isinstance(value, UNSAFE_TYPES) and not isinstance(value, types.GeneratorType):
            raise TypeError(f"a {type(value).__name__} cannot be handed to graded code")

    def check_open(self, obj: Any) -> None:
        if isinstance(getattr(type(obj), "sandbox_interface", None), str):
            raise PermissionError(f"{type(obj).__name__} is served through its declared methods only")

    def serve(self, obj: Any, method: Any, args: Any) -> Any:
        kind = getattr(type(obj), "sandbox_interface", None)
        interface = served.INTERFACES.get(kind) if isinstance(kind, str) else None
        if interface is None:
            raise PermissionError(f"{type(obj).__name__} declares no interface")
        values = served.check_call(interface, method, args)
        return served.check_result(getattr(obj, method)(*values))
