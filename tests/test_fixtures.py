"""The recorded data is current: rebuilt from today's solutions, every fixture file is byte for byte the committed one.

The student's release runs its tests on data recorded from the reference solutions
(``mini_vllm/testing/fixtures/``, made by ``make fixtures``). A solution that changes while its
recording does not would grade students against yesterday's reference, so this fails first.
"""

from __future__ import annotations

import pytest

from instructor.fixtures import FILES, build
from mini_vllm.testing.recorded import FIXTURES_DIR


@pytest.mark.parametrize("name", sorted(FILES))
def test_recorded_data_matches_the_solutions(name: str) -> None:
    path = FIXTURES_DIR / name
    assert path.is_file(), f"{path.name} is missing: run `make fixtures` and commit mini_vllm/testing/fixtures/"
    assert build(name) == path.read_bytes(), (
        f"{path.name} is stale: what the reference solutions produce today differs from the recording "
        "(a solution or a recorded case changed). Run `make fixtures` and commit the result")
