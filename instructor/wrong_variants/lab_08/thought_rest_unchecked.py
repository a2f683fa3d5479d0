"""Wrong on purpose: the thought may end with any token, whatever it leaves after the tag.

The README's rule in the thinking phase: the token that ends the thought hands the grammar
the bytes after `</think>` (or the whole `<tool_call>...` token), so a token whose rest the
grammar refuses may not end it. Skipping the check lets `>junk` end the thought, and the
reply starts outside the grammar.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-08", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_a_thought_never_ends_with_a_rest_the_grammar_refuses"]
MAY_COST = [5]


class StructuredSampler(_solution.StructuredSampler):
    def _think(self, scores):  # type: ignore[no-untyped-def]
        best = _solution._best(self._ordinary, scores)
        data = self._tail + (self.vocab.tokens[best] or b"")
        output = self._output_after_thought(data)
        if output is None:
            self._tail = data[len(data) - self._tail_size:] if len(data) > self._tail_size else data
            return best
        self.phase, self.state = CONSTRAINED, self._walk(self.automaton.start, output)  # noqa: F821  (from __all__)
        return best
