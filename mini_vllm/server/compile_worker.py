"""The grammar compile worker: a spawned process that turns a :class:`CompileJob` into plain data.

The pool (:mod:`mini_vllm.server.compile_pool`) owns the workers and their limits; this is what runs inside
one, under ``RLIMIT_AS`` (set at start) and ``RLIMIT_CPU`` (set per job), plus a soft CPU timer
(``ITIMER_PROF``) that stops a regex compile past its budget and keeps the worker. The lab code it runs
(lab-08's lift and masker, lab-09's grammar) may be the student's: whatever it raises is sent back as
its class name and message, and the worker waits for the next job.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
from array import array
from dataclasses import dataclass
from typing import Any

from mini_vllm.grammars.schema_grammar import Sentence
from mini_vllm.labtypes.lab08 import ByteAutomaton, Vocabulary, token_trie
from mini_vllm.server.stack_decoding import rebuild_grammar


@dataclass(frozen=True)
class CompileJob:
    """What to compile: lab-08's regex, or (``sentence``) lab-09's grammar with a stack, by whose lab code.

    With both (``json_object``), the regex is the fallback while lab-09 is still the starter's stub.
    """

    regex: str
    sentence: Sentence | None
    lab08: str  # the lab files load_lab chose
    lab09: str
    fallback: Sentence | None = None  # the same schema with a stack, where the regex's compile passes its budget


class _PastBudget(BaseException):
    """The compile's CPU timer ran out (a BaseException: the student's ``except Exception`` lets it through)."""


def _past_budget(signum: int, frame: Any) -> None:
    raise _PastBudget


def _worker_main(conn: Any, memory_bytes: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    signal.signal(signal.SIGPROF, _past_budget)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        _, job, cpu_seconds, soft_seconds = message
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = int(used.ru_utime + used.ru_stime) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (spent + int(cpu_seconds), resource.RLIM_INFINITY))
        try:
            if soft_seconds:
                signal.setitimer(signal.ITIMER_PROF, soft_seconds)
            try:
                compiled = _compile_job(job)
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
            conn.send(("ok", pickle.dumps(compiled, protocol=5)))
        except _PastBudget:
            conn.send(("slow", soft_seconds))
        except MemoryError:
            try:
                conn.send(("error", ("MemoryError", "out of memory")))
            except MemoryError:  # not even room to say so: the pool sees a dead worker (a 400 all the same)
                os._exit(1)
        except BaseException as error:  # the student's code may raise anything
            conn.send(("error", (type(error).__name__, str(error)[:2000])))


def _compile_job(job: CompileJob) -> tuple[str, Any]:
    if job.sentence is not None:
        stack = _compile_stack(job)
        if stack is not None:
            return "stack", stack
    return "regex", _compile(job.regex, job.lab08)  # json_object while lab-09 is a stub: the flat object


# One token and EOS: the labs' pieces are tried on it once, so a stub says so here, before any reply starts.
_TINY = Vocabulary(tokens=[b"{", None], eos_token_id=1)


def _compile(regex: str, lab_path: str) -> tuple[Any, ...]:
    """lab-08's byte automaton as plain data; its masker tried once on a one-token vocabulary."""
    from mini_vllm.grammars.grammar import regex_to_chars
    from mini_vllm.labs import load_lab

    lab = load_lab("lab-08", lab_path)
    automaton = lab.lift_to_bytes(regex_to_chars(regex))
    lab.TokenMasker(automaton, _TINY, token_trie(_TINY)).mask(automaton.start)
    return _automaton_data(automaton)


def _automaton_data(automaton: Any) -> tuple[int, list[bool], list[bytes]]:
    """A byte automaton as plain data: its start, which states accept, each state's row of 256 next states."""
    states = automaton.num_states
    table = getattr(automaton, "table", None)
    if isinstance(automaton, ByteAutomaton) and isinstance(table, list):
        rows = [array("i", row).tobytes() for row in table]
        accepting = [bool(a) for a in automaton.accepting]
    else:  # a student's own automaton type: read it through its interface
        rows = [array("i", [automaton.step(s, b) for b in range(256)]).tobytes() for s in range(states)]
        accepting = [bool(automaton.is_accepting(s)) for s in range(states)]
    return int(automaton.start), accepting, rows


def _compile_stack(job: CompileJob) -> tuple[Any, ...] | None:
    """lab-09's grammar for ``job.sentence``, each lexeme lifted to bytes by lab-08; None when lab-09 is still the
    starter's stub and the job has a regex to fall back to (its NotImplementedError otherwise)."""
    from mini_vllm.grammars.grammar import regex_to_chars
    from mini_vllm.grammars.schema_grammar import sentence_grammar
    from mini_vllm.labs import load_lab

    assert job.sentence is not None
    grammar = sentence_grammar(job.sentence)
    lab08 = load_lab("lab-08", job.lab08)
    lexemes = [(lexeme.name, lexeme.regex, *_automaton_data(lab08.lift_to_bytes(regex_to_chars(lexeme.regex))))
               for lexeme in grammar.lexemes]
    data = (grammar.start, [(rule.lhs, rule.rhs) for rule in grammar.rules], lexemes)
    try:
        _probe(load_lab("lab-09", job.lab09), rebuild_grammar(data))
    except NotImplementedError:
        if job.regex:
            return None
        raise
    return data


def _probe(lab09: Any, grammar: Any) -> None:
    """lab-09's pieces once, on a vocabulary of one token: a stub says so here, before any reply starts."""
    matcher = lab09.ByteMatcher(grammar, lab09.EarleyParser(grammar))  # in task order: the first stub is named
    lab09.SplitMasker(grammar, _TINY, token_trie(_TINY)).mask(matcher)


class CompileWorker:
    """One spawned worker process and the pipe to it (the pool's side)."""

    def __init__(self, memory_bytes: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, memory_bytes), daemon=True,
                                       name="mini_vllm-grammar-compile")
        self.process.start()
        child.close()

    def run(self, job: CompileJob, cpu_seconds: int, soft_seconds: float = 0) -> tuple[str, Any]:
        """In a daemon thread: send the job, wait for its answer (EOF if the worker was killed)."""
        try:
            self.conn.send(("compile", job, cpu_seconds, soft_seconds))
            return self.conn.recv()  # type: ignore[no-any-return]
        except (EOFError, OSError, BrokenPipeError):
            return ("died", self.process.exitcode)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()
