"""Value types and given constants of each lab (``labNN.py``): what crosses between tests and a lab's code.

A graded run loads the student's module in a sandboxed child process; a call's arguments and
results cross as plain data or as one of the dataclasses and exceptions declared here.
"""
