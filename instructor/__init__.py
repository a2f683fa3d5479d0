"""The instructor's side of the course: never shipped to students (the student's release leaves it out).

Wrong variants, mutation testing, the canary, the contract runner, the correct-but-slow
baselines, and the builders of the student release and the recorded data live here.
Imports run one way: this package may import ``mini_vllm``; ``mini_vllm`` never imports it.
"""
