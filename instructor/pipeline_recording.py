"""Record lab-02's reference pipeline for every request lab-02's task-3 tests make.

Task 3 serves the student's ChunkFormatter behind :func:`mini_vllm.testing.replay.replay_pipeline`.
To record, a child process runs those tests on the reference (its formatter makes every request
run to the end) with the replay's ``recorder`` hook set: each request then gets the reference
pipeline, over the reference labs it composes, wrapped to write down every call and answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from mini_vllm.labs import REPO_ROOT, lab_dir, load_lab
from mini_vllm.testing import replay


def record_lab02_requests() -> dict[str, Any]:
    """request key -> the reference pipeline's calls and answers (the longest run, when a request recurs)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "recorded.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LAB_IMPL", "PYTEST_"))}
        done = subprocess.run([sys.executable, "-m", "instructor.pipeline_recording", str(out)], cwd=REPO_ROOT,
                              env={**env, "LAB_IMPL": "solution"}, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(f"recording lab-02's task-3 requests failed (exit {done.returncode}):\n"
                               f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return json.loads(out.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def main(argv: list[str]) -> int:
    import pytest

    from instructor.replies import reference_labs

    scripts: dict[str, list[list[dict[str, Any]]]] = {}
    with reference_labs():
        reference = load_lab("lab-02", "solution")

    def record(key: str, *args: Any, **kwargs: Any) -> replay.Recording:
        with reference_labs():  # lab-02 picks the labs it composes at construction
            pipeline = reference.OutputPipeline(*args, **kwargs)
        script: list[dict[str, Any]] = []
        scripts.setdefault(key, []).append(script)
        return replay.Recording(pipeline, script)

    replay.recorder = record
    code = pytest.main([str(lab_dir("02")), "--task", "3", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "-p", "no:randomly"])
    if code != 0:
        return int(code)
    longest = {key: max(runs, key=len) for key, runs in sorted(scripts.items())}
    Path(argv[0]).write_text(json.dumps(longest), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
