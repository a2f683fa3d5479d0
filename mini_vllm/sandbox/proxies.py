"""The proxies a side holds for the other side's objects: attribute look-ups and calls become requests.

A :class:`Remote` stands for an object the other process owns; comparing and hashing stay local
(identity), so an object from the other side can never decide that it equals what a test expects.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol


class Peer(Protocol):
    """What a proxy needs of its channel's end (:class:`mini_vllm.sandbox.peer.Peer`)."""

    seen: dict[int, int]  # remote object id -> how many references to it came in
    released: list[Any]  # [object id, references seen] of proxies dropped here, sent with the next request

    def request(self, op: str, *args: Any) -> Any: ...

# Special methods a proxy forwards; comparisons and hashing stay local (identity), so an
# object from the other side can never decide that it equals what a test expects.
FORWARDED = frozenset({"__len__", "__iter__", "__next__", "__bool__", "__getitem__", "__contains__", "__str__",
                       "__repr__", "__call__"})

def public_methods(cls: type) -> list[str]:
    names = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        for name, member in vars(klass).items():
            if (not name.startswith("_") or name in FORWARDED) and (
                    inspect.isfunction(member) or isinstance(member, (staticmethod, classmethod))
                    or inspect.ismethoddescriptor(member)):
                names.add(name)
    return sorted(names)


class Remote:
    """Stands for an object the other process owns. Attribute look-ups and calls become requests."""

    __slots__ = ("__weakref__", "_sandbox_id", "_sandbox_methods", "_sandbox_peer")

    def __init__(self, peer: Peer, object_id: int, methods: frozenset[str]) -> None:
        object.__setattr__(self, "_sandbox_peer", peer)
        object.__setattr__(self, "_sandbox_id", object_id)
        object.__setattr__(self, "_sandbox_methods", methods)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in self._sandbox_methods:
            return RemoteMethod(self, name)
        return self._sandbox_peer.request("getattr", self._sandbox_id, name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._sandbox_peer.request("setattr", self._sandbox_id, name, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._sandbox_peer.request("call", self._sandbox_id, None, list(args), kwargs)

    def _forward(self, special: str, *args: Any) -> Any:
        return self._sandbox_peer.request("call", self._sandbox_id, special, list(args), {})

    def __len__(self) -> int:
        return int(self._forward("__len__"))

    def __iter__(self) -> Any:
        return self._sandbox_peer.request("iter", self._sandbox_id)

    def __next__(self) -> Any:
        return self._forward("__next__")

    def __bool__(self) -> bool:
        return self._sandbox_peer.request("bool", self._sandbox_id) is True

    def __getitem__(self, key: Any) -> Any:
        return self._forward("__getitem__", key)

    def __contains__(self, item: Any) -> bool:
        return self._sandbox_peer.request("contains", self._sandbox_id, item) is True

    def __repr__(self) -> str:
        text = self._sandbox_peer.request("repr", self._sandbox_id)
        return text if isinstance(text, str) else "<remote object>"

    def __str__(self) -> str:
        text = self._sandbox_peer.request("str", self._sandbox_id)
        return text if isinstance(text, str) else "<remote object>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Remote) and other._sandbox_peer is self._sandbox_peer \
            and other._sandbox_id == self._sandbox_id

    def __hash__(self) -> int:
        return hash((id(self._sandbox_peer), self._sandbox_id))

    def __del__(self) -> None:
        peer = self._sandbox_peer
        if peer is not None:
            object_id = self._sandbox_id
            peer.released.append([object_id, peer.seen.get(object_id, 0)])


class RemoteMethod:
    """``proxy.feed``: calling it is one request, not a look-up and then a call."""

    __slots__ = ("name", "owner")

    def __init__(self, owner: Remote, name: str) -> None:
        self.owner = owner
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        owner = self.owner
        return owner._sandbox_peer.request("call", owner._sandbox_id, self.name, list(args), kwargs)

    def __repr__(self) -> str:
        return f"<remote method {self.name}>"
