"""Each starter exposes the public names and signatures the tests call (shipped in the student's release).

The listing was recorded from the reference solutions (``mini_vllm/testing/fixtures/api.json``),
so a renamed method, a dropped parameter or a changed dataclass field in your ``starter.py``
shows here, by name, before it shows as a confusing failure in a lab's tests.
"""

from __future__ import annotations

import pytest

from mini_vllm.labs import lab_dir, load_lab
from mini_vllm.testing.api import public_api
from mini_vllm.testing.recorded import load

RECORDED = load("api.json")


@pytest.mark.parametrize("lab", sorted(RECORDED))
def test_starter_keeps_the_recorded_api(lab: str) -> None:
    starter = public_api(load_lab(lab_dir(lab).name, "starter"))
    wanted = RECORDED[lab]
    differences = {name: (starter.get(name, "(missing)"), wanted.get(name, "(not in the course's API)"))
                   for name in starter.keys() | wanted.keys() if starter.get(name) != wanted.get(name)}
    assert not differences, (
        f"{lab}/starter.py must keep the names and signatures the tests call; (yours, the course's): {differences}")
