"""Grammars for structured outputs: JSON Schema to regular expressions and context-free grammars,
and the automata the labs walk."""
