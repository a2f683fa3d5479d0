# Dishonest (every lab): appended to a lab's starter, it makes every public name of the lab a "universal liar".
# Each function returns, and each class constructs, an object whose __contains__, __bool__, __eq__ and
# comparisons say yes, whose len is 0, which iterates empty and whose every attribute and call is another liar.
# No task is implemented: it must earn nothing in any lab (tests/test_course_contract.py grades it beside the
# blank starter). A test that asked such an object `x in result`, `bool(result)` or `result == expected`
# would believe it.


class _Liar:
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Liar()

    def __call__(self, *args, **kwargs):
        return _Liar()

    def __contains__(self, item):
        return True

    def __bool__(self):
        return True

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __lt__(self, other):
        return True

    __le__ = __gt__ = __ge__ = __lt__

    def __hash__(self):
        return 0

    def __len__(self):
        return 0

    def __iter__(self):
        return iter(())

    def __getitem__(self, key):
        return _Liar()

    def __str__(self):
        return ""

    def __repr__(self):
        return ""

    def __index__(self):
        return 0

    def __int__(self):
        return 0


def _lie(*args, **kwargs):
    return _Liar()


def _liar_class(original):
    members = {"__module__": original.__module__, "__qualname__": original.__qualname__}
    for klass in original.__mro__[:-1]:
        for attr, value in vars(klass).items():
            if attr.startswith("_") or attr in members:
                continue
            members[attr] = property(_lie) if isinstance(value, property) else _lie
    return type(original.__name__, (_Liar,), members)


for _name, _value in list(globals().items()):
    if _name.startswith("_") or getattr(_value, "__module__", None) != __name__:
        continue
    if isinstance(_value, type):
        globals()[_name] = _liar_class(_value)
    elif callable(_value):
        globals()[_name] = _lie
