"""The grading sandbox: graded code runs in a walled-off child process, seen through proxies.

See :mod:`mini_vllm.sandbox.policy` (every bound and budget, as a list), :mod:`mini_vllm.sandbox.remote` (the
trusted side), :mod:`mini_vllm.sandbox.child` (the child), :mod:`mini_vllm.sandbox.wire` and
:mod:`mini_vllm.sandbox.declared` (what crosses) and :mod:`mini_vllm.sandbox.isolation` (the walls). Tests need
only :func:`each`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from mini_vllm.sandbox.proxies import RemoteMethod


def each(method: Callable[..., Any], inputs: Iterable[Any]) -> list[Any]:
    """``[method(x) for x in inputs]``, in one crossing when ``method`` runs in the grading sandbox.

    The calls are made in order, one at a time, exactly as the loop would make them; if one
    raises, the exception comes back as the loop would have raised it (the calls before it
    were made, the ones after were not). Across the sandbox a loop of small calls costs a
    round trip each; this costs one.
    """
    items = list(inputs)
    if isinstance(method, RemoteMethod) and len(items) > 1:
        owner = method.owner
        return list(owner._sandbox_peer.request("map", owner._sandbox_id, method.name, [[x] for x in items]))
    return [method(x) for x in items]
