"""The Gradescope autograder: ``build`` makes the zip, ``run`` grades inside it, ``batch`` grades a class with it."""
