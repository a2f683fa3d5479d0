"""The value types and constants each lab is given, defined once where both sides of the grader trust them.

A lab's starter and solution import these and re-export them, so ``lab.ToolCall`` works as
before. They live in the engine rather than in the lab folder because graded runs execute the
student's module in a sandboxed child process (:mod:`mini_vllm.sandbox`): values that cross
the boundary are rebuilt on the trusted side from their fields, with these very classes, so a
submission cannot change what a ``ToolCall`` compares equal to or what a ``StepOutput`` holds.
"""
