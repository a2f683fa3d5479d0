"""lab-08's shipped test kit holds no answer: a submission assembled from it scores nothing in any task.

``mini_vllm/testing/structured.py`` ships with the student's copy (the tests need it), so nothing in
it may pass a task when pasted in: its oracles are libraries (outlines-core, llguidance, the
stdlib's UTF-8 decoder), recorded data and properties. The submission below puts every public
function and class of the kit where each of the lab's functions would go, called with that
function's own arguments, and answers with the first result of the kind the function returns
(a ByteAutomaton, a list of ids, a state, a token); graded as
``make lab-08`` grades, in the sandbox, it must earn 0 points in every task.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from instructor.contract import run_jobs, task_of
from instructor.variants import Job
from mini_vllm.labs import lab_dir

SUBMISSION = '''
"""Every public name of lab-08's shipped test kit, tried in place of each task's function."""
from mini_vllm.testing import structured as kit
from mini_vllm.labtypes.lab08 import *  # noqa: F403

_KIT = [getattr(kit, name) for name in sorted(vars(kit)) if not name.startswith("_")
        and callable(getattr(kit, name)) and getattr(getattr(kit, name), "__module__", "") == kit.__name__]


def _first(kind, *args):
    """The first answer of the kind the task returns, from any function of the kit given the task's arguments."""
    for function in _KIT:
        try:
            answer = function(*args)
        except Exception:
            continue
        if isinstance(answer, kind) and not isinstance(answer, bool):
            return answer
    raise NotImplementedError("nothing in the kit answers this")


def utf8_sequences(lo, hi):
    return _first(list, lo, hi)


def lift_to_bytes(chars):
    return _first(ByteAutomaton, chars)


class TokenMasker:
    def __init__(self, automaton, vocab):
        self.automaton, self.vocab = automaton, vocab

    def scan(self, state):
        return _first(list, self.automaton, self.vocab, state)

    def mask(self, state):
        return _first(list, self.automaton, self.vocab, state)


class GrammarCursor:
    def __init__(self, automaton, vocab):
        self.automaton, self.vocab = automaton, vocab
        self.state, self.pending, self.finished = automaton.start, b"", False

    def advance(self, token_id):
        self.state = _first(int, self.automaton, self.state, self.vocab.tokens[token_id] or b"")


class TokenIndex:
    def __init__(self, automaton, vocab):
        self.automaton, self.vocab = automaton, vocab
        self.stats = _first(IndexStats, automaton, vocab)

    def allowed(self, state):
        return _first(list, self.automaton, self.vocab, state)


class StructuredSampler:
    def __init__(self, automaton, vocab, allowed_at, *, thinking=False, implicit_end=None):
        self.args = (automaton, vocab, allowed_at)
        self.phase = "thinking" if thinking else "constrained"

    def choose(self, scores):
        return _first(int, *self.args, scores)
'''


@pytest.mark.slow
def test_a_submission_made_of_the_shipped_kit_scores_nothing(tmp_path: Path) -> None:
    submission = tmp_path / "kit_submission.py"
    submission.write_text(SUBMISSION, encoding="utf-8")
    runs = run_jobs(lab_dir("lab-08"), [Job("kit", {"LAB_SANDBOX": "1", "LAB_IMPL_08": str(submission)})],
                    timeout=900)
    run = runs["kit"]
    assert run.tests, f"the grading must report every test:\n{run.output[-2000:]}"
    scored: dict[int, float] = {}
    for entry in run.tests:
        scored[task_of(entry)] = scored.get(task_of(entry), 0) + entry["score"]
    assert not any(scored.values()), (
        "lab-08's shipped test kit must hold no answer, yet a submission built from it scores "
        f"{ {task: points for task, points in scored.items() if points} } (task: points):\n"
        + "\n".join(f"  {t['name']}: {t['score']}" for t in run.tests if t["score"]))
