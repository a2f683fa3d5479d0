"""What the tests hand to graded code crosses as data or through a declared interface, and nothing more.

These check the two ends of the sandbox's channel in this process (the grading child is
mini_vllm/sandbox/served.py's stand-ins on one side, the trusted lender on the other), so they are
fast; tests/test_grader_sandbox.py grades whole dishonest submissions through the real sandbox.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mini_vllm import ByteTokenizer
from mini_vllm.sandbox import served
from mini_vllm.sandbox.lenders import StrictLender
from mini_vllm.sandbox.peer import PARENT
from mini_vllm.sandbox.wire import Codec
from mini_vllm.testing.structured import CountingAutomaton
from mini_vllm.testing.tokenizers import CountingTokenizer
from mini_vllm.tokenizers.hf import HFTokenizer, hf_bpe_tokenizer


def child_codec() -> Codec:
    """The child's decoder: builds copies and stand-ins (whose calls are recorded, not sent)."""
    from mini_vllm.sandbox.mirrors import BUILDERS

    calls: list[Any] = []

    def build_served(kind: str, object_id: int, facts: Any) -> Any:
        return served.STAND_INS[kind](lambda method, args: calls.append((method, args)), object_id, facts)

    return Codec(lambda obj: [1, 1, 0, None, "x"], lambda ref: None, lambda name: None,
                 lambda kind, state: BUILDERS[kind](state), build_served, trusted=False)


def parent_codec(lent: list[Any]) -> Codec:
    def to_ref(obj: Any) -> list[Any]:
        lent.append(obj)
        return [PARENT, len(lent), id(type(obj)), [], type(obj).__name__]
    return Codec(to_ref, lambda ref: None, lambda name: None, lambda kind, state: None,
                 lambda kind, object_id, facts: None, trusted=True)


def across(obj: Any) -> tuple[Any, list[Any]]:
    lent: list[Any] = []
    return child_codec().decode(parent_codec(lent).encode(obj)), lent


def test_a_hugging_face_tokenizer_crosses_as_its_own_copy() -> None:
    """The child gets a copy rebuilt from the JSON: its backend is not the tests', so saving a file or adding
    tokens to it changes nothing here (it once wrote any file as root from the trusted side)."""
    original = HFTokenizer(hf_bpe_tokenizer())
    size = original.backend.get_vocab_size(with_added_tokens=True)
    copy, lent = across(original)
    assert not lent, f"nothing is lent by reference: {lent}"
    assert isinstance(copy, HFTokenizer) and copy.backend is not original.backend
    copy.backend.add_special_tokens(["<|attack|>"])
    assert original.backend.get_vocab_size(with_added_tokens=True) == size, "the oracle must not change"
    ids = original.encode("héllo 🫨")
    assert copy.decode(ids) == original.decode(ids)


def test_a_counting_tokenizer_is_served_never_sent() -> None:
    """The child's stand-in holds facts and a call back: no inner tokenizer, no count of its own."""
    counting = CountingTokenizer(ByteTokenizer())
    stand_in, lent = across(counting)
    assert lent == [counting], "the counting tokenizer stays here, lent for its declared methods"
    assert isinstance(stand_in, served.ServedTokenizer)
    assert stand_in.vocab_size == counting.vocab_size and stand_in.eos_token_id == counting.eos_token_id
    for field in ("inner", "ids_decoded", "decode_calls", "_automaton"):
        assert not hasattr(stand_in, field), f"the stand-in must not carry {field}"


def test_a_counting_automaton_is_served_never_sent() -> None:
    from mini_vllm.testing.structured import library_grammar

    automaton = CountingAutomaton(library_grammar("ab").automaton)
    stand_in, lent = across(automaton)
    assert lent == [automaton] and isinstance(stand_in, served.ServedAutomaton)
    assert (stand_in.start, stand_in.num_states) == (automaton.start, automaton.num_states)
    assert not hasattr(stand_in, "_automaton") and not hasattr(stand_in, "steps")


def test_an_endless_iterator_is_drawn_to_its_bound_in_the_child() -> None:
    """decode(itertools.repeat(1)) once kept the trusted side looping for ever; now it is refused in the child."""
    stand_in = served.ServedTokenizer(lambda method, args: pytest.fail("nothing may be sent"), 1,
                                      {"vocab_size": 260, "eos_token_id": 256, "all_special_ids": [256]})
    with pytest.raises(ValueError, match="at most"):
        stand_in.decode(itertools.repeat(1))


@pytest.mark.parametrize(("method", "args", "error"), [
    ("decode", [list(range(served.MAX_IDS + 1))], ValueError),  # over the size bound
    ("decode", [[1, "2"]], ValueError),  # not an int
    ("decode", [[1, True]], ValueError),
    ("decode", ["abc"], ValueError),  # a string is not a list of ids
    ("decode", [[1], False, "extra"], ValueError),
    ("encode", ["x" * (served.MAX_TEXT + 1)], ValueError),
    ("sandbox_account", [{"ids_decoded": -5}], AttributeError),  # not declared
    ("__init__", [], AttributeError),
    ("inner", [], AttributeError),
], ids=["too-many-ids", "str-id", "bool-id", "str-ids", "extra-argument", "long-text", "sandbox_account",
        "__init__", "inner"])
def test_the_trusted_side_checks_every_served_call(method: str, args: list[Any], error: type[Exception]) -> None:
    """The stand-in is the student's code too: the trusted side checks the declaration again."""
    counting = CountingTokenizer(ByteTokenizer())
    with pytest.raises(error):
        StrictLender().serve(counting, method, args)
    assert counting.ids_decoded == 0 and counting.decode_calls == 0


def test_a_served_object_has_no_other_surface() -> None:
    """No attribute, setattr, iteration or call by another name reaches a served object."""
    counting = CountingTokenizer(ByteTokenizer())
    lender = StrictLender()
    assert lender.serve(counting, "decode", [[104, 105]]) == "hi" and counting.ids_decoded == 2
    with pytest.raises(PermissionError):
        lender.check_open(counting)


def test_a_served_string_holds_placeholders_not_the_stop() -> None:
    """lab-05's stops: str's own C functions read placeholders; every meaningful read is served."""
    text = "STOP now"
    calls: list[Any] = []

    def call(method: str, args: list[Any]) -> Any:
        calls.append(method)
        if method == "text":
            return text
        key = args[0]
        return text[slice(*key) if isinstance(key, list) else key]

    stop = served.ServedStr(call, 7, {"length": len(text), "placeholder": served.placeholder(text)})
    assert isinstance(stop, str) and len(stop) == len(text)
    assert text not in str.__str__(stop) and "S" not in str.__str__(stop), "a C-level copy gives placeholders"
    assert stop[0] == "S" and stop[1:4] == "TOP" and str(stop) == text and list(stop) == list(text)
    assert calls == ["getitem", "getitem", "text", "text"], calls
    assert served.placeholder(text) == served.placeholder(text) != served.placeholder("STOP nox")


# Plain values, nested the way messages nest them: lists that mix ints (any size: past 64 bits they travel as
# text), bools, strings, floats and None, and tuples and sets that must come back as themselves.
_SCALARS = (st.integers() | st.integers(min_value=-2**63, max_value=2**63 - 1) | st.booleans() | st.none()
            | st.text(max_size=5) | st.floats(allow_nan=False) | st.binary(max_size=5))
_NESTED = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=5)
                       | st.lists(inner, max_size=5).map(tuple)
                       | st.frozensets(st.integers() | st.text(max_size=3), max_size=4).map(set), max_leaves=30)


@settings(derandomize=True, max_examples=200)
@given(message=st.lists(_NESTED, max_size=6))
def test_plain_values_cross_exactly_as_they_were(message: list[Any]) -> None:
    """What a message holds comes back equal and of the same types, whatever mix of plain values a list holds
    (the codec sends a list of plain values as it is, once it has checked every int fits in 64 bits)."""
    back, lent = across(message)
    assert back == message and _shape(back) == _shape(message), f"sent {message!r:.300}, got {back!r:.300}"
    assert lent == [], "plain values are never lent"


def _shape(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_shape(v) for v in value])
    if isinstance(value, set):
        return ("set", sorted(map(repr, value)))
    return type(value).__name__
