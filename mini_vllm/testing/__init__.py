"""Test kit shared by every lab: hypothesis strategies, test tokenizers, stream traces, grading."""
