"""Wrong on purpose: after a branch of the trie, the walk puts the lexer back but not the parser.

A token whose bytes ended a lexeme (`",` inside a string) pushed that lexeme; the next branch
then starts from a parser that has already taken it.
"""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-09", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_trie_mask_equals_llguidance", "test_trie_walk_prunes_dead_prefixes"]
MAY_COST = [3]


def _walk(trie: Any, matcher: Any, node: int, allowed: list[int]) -> None:
    lexer = matcher.lexer_state
    for child in trie.children(node):
        if not matcher.feed(trie.byte[child]):
            continue
        allowed.extend(trie.ending[child])
        if trie.skip[child] > child + 1:
            _walk(trie, matcher, child, allowed)
        matcher.lexer_state = lexer  # the parser is not rolled back


class TrieMasker(_solution.TrieMasker):
    def mask(self, matcher: Any) -> list[int]:
        allowed: list[int] = []
        _walk(self.trie, matcher, 0, allowed)
        if matcher.can_end():
            allowed.append(self.vocab.eos_token_id)
        return sorted(allowed)
