# Dishonest (every lab): appended to a lab's starter, every public function and method returns the empty value
# of the type its signature states ("" for str, [] for a list, 0, False, None, an empty declared value) and
# every constructor accepts anything. No task is implemented: it must earn nothing in any lab
# (tests/test_course_contract.py grades it beside the blank starter). A test that only measured work, or
# compared lengths, would pay it for doing nothing.
import inspect as _inspect
import re as _re

_EMPTY = {"str": "", "bytes": b"", "int": 0, "float": 0.0, "bool": False, "None": None, "list": [], "Sequence": [],
          "tuple": (), "frozenset": frozenset(), "set": set(), "dict": {}, "Mapping": {}, "Any": None}


def _empty_of(annotation):
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    if not text or text is _inspect.Signature.empty:
        return None
    if _re.search(r"\|\s*None\b|^None\b|Optional\[", text):
        return None
    head = _re.match(r"[\w.]+", text)
    name = head.group(0).rsplit(".", 1)[-1] if head else ""
    if name in _EMPTY:
        value = _EMPTY[name]
        return value.copy() if isinstance(value, (list, set, dict)) else value
    declared = globals().get(name)
    if isinstance(declared, type):
        try:
            return declared()
        except Exception:
            return None
    return None


def _returning_empty(function):
    try:
        annotation = _inspect.signature(function).return_annotation
    except (TypeError, ValueError):
        annotation = None

    def empty(*args, **kwargs):
        return _empty_of(annotation)
    return empty


def _empty_class(original):
    members = {"__module__": original.__module__, "__qualname__": original.__qualname__,
               "__init__": lambda self, *args, **kwargs: None}
    for klass in original.__mro__[:-1]:
        for attr, value in vars(klass).items():
            if attr.startswith("_") or attr in members:
                continue
            if isinstance(value, property):
                members[attr] = property(_returning_empty(value.fget))
            elif callable(value):
                members[attr] = _returning_empty(value)
    return type(original.__name__, (object,), members)


for _name, _value in list(globals().items()):
    if _name.startswith("_") or getattr(_value, "__module__", None) != __name__:
        continue
    if isinstance(_value, type):
        globals()[_name] = _empty_class(_value)
    elif callable(_value):
        globals()[_name] = _returning_empty(_value)
