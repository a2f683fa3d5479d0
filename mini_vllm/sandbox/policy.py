"""The grading sandbox's policy, as a list: what the child sees, what crosses, each budget and each limit.

Every number the sandbox enforces is here, once; the modules that enforce them import it from here.
How each is enforced: :mod:`.isolation` (the walls), :mod:`.wire`, :mod:`.peer`, :mod:`.lenders`, :mod:`.served` and
:mod:`.declared` (what crosses), :mod:`.budget` and :mod:`.parent` (the budgets), :mod:`.worker` (the child's life).
The per-lab CPU budget is ``grading.toml``'s ``call_budget_s`` (``[labs.lab-NN]``, else the top-level one): the
grading plugin reads the file and hands the figures to :func:`configure`; ``LAB_CALL_BUDGET_S`` overrides every
lab's (the grader's own tests use it).
"""

from __future__ import annotations

import os
import resource

# ------------------------------------------------------------------ what the child sees (bound read-only)

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache")
# Besides SYSTEM: the interpreter and its packages, and the engine (mini_vllm) without these of its folders.
ENGINE_KEPT_OUT = ("testing",)  # mini_vllm/testing: the tests' kit, recorded data and oracles
SCRATCH_BYTES = 64 * 2**20  # the child's private /tmp: the one place it can write (its root is read-only)
CHILD_UIDS = range(1_700_000, 1_800_000)  # as root, each child is a user id of its own, taken from here

# ------------------------------------------------------------------ the child's own limits (set before it imports)

LIMITS = {
    resource.RLIMIT_CPU: 600,  # seconds of CPU over the child's whole life
    resource.RLIMIT_DATA: 4 * 2**30,  # bytes of heap; RLIMIT_AS would also count the libraries' mappings
    resource.RLIMIT_FSIZE: 16 * 2**20,  # no file larger than 16 MiB
    resource.RLIMIT_NOFILE: 256,
}
# The allocator's settings, per lab, in the child's environment (glibc reads them as the child starts). Lab-07's cost
# tests count the pages the child's kernel hands it fresh (minor faults, read from /proc on the trusted side):
# with the threshold fixed, every block of 64 KiB or more is a fresh mapping, so a copy of a long item is pages
# touched anew each time it is made; glibc's default threshold rises to the size of each block freed, and then
# the heap serves the same copies again without a fault. Lab-01's cost test counts the same way, and its copies
# of an open block (80 KiB at 20,000 characters) are small enough for the heap's free top: there the heap is
# given back as soon as it is free (no trim threshold, no padding), so a copy made again is pages touched anew.
ALLOCATOR_ENV = {
    "01": {"MALLOC_MMAP_THRESHOLD_": str(64 * 1024), "MALLOC_TRIM_THRESHOLD_": "0", "MALLOC_TOP_PAD_": "0"},
    "07": {"MALLOC_MMAP_THRESHOLD_": str(64 * 1024)},
}
MAX_PROCESSES = 64  # RLIMIT_NPROC: counted per user id, and per user namespace on Linux >= 5.14
GRADER_MEMORY = 4 * 2**30  # bytes of heap the trusted side may take (a whole graded run needs under 1 GiB)

# ------------------------------------------------------------------ what crosses

# Values travel as MessagePack; these modules' dataclasses and named tuples travel by value (rebuilt with the
# receiver's own class), and these modules' exceptions are rebuilt as themselves (mini_vllm.sandbox.wire).
VALUE_MODULES = ("mini_vllm.labtypes.", "mini_vllm.sampling")
ERROR_MODULES = ("builtins", "mini_vllm.labtypes.", "json.decoder")
MAX_INT = 2**63  # an int past 64 bits crosses as text
MAX_MESSAGE = 16 * 2**20  # a message larger than this is a runaway, not an answer (honest ones stay under 2 MiB)
BYTES_PER_TEST = 256 * 2**20  # bytes the trusted side reads from the child during one test (honest tests: < 20 MiB)
OUTPUT_KEPT = 64 * 1024  # bytes of the child's printing kept between two calls
OUTPUT_PER_TEST = 256 * 1024  # bytes of the child's own printing shown per test; the rest is cut
MAX_STATE_CHARACTERS = 8 << 20  # a Hugging Face tokenizer's JSON sent as a copy: the shipped ones are under a MiB
# A served object's declared methods (mini_vllm.sandbox.served): each argument bounded.
MAX_IDS = 1 << 16  # ids in one served decode: far more than any test decodes at once
MAX_TEXT = 1 << 20  # characters in one served string argument
MAX_STATE = 1 << 31  # an automaton state or a token id
# What the child returns must be of the type the lab's API states (mini_vllm.sandbox.declared: the API is
# mini_vllm/testing/fixtures/api.json, recorded from the reference solutions).

# ------------------------------------------------------------------ budgets (CPU seconds, as the kernel counts them)

DEFAULT_BUDGET_S = 5.0  # per call, for a lab grading.toml gives none
WALL_FACTOR = 3  # the wall ceiling, in budgets: honest code that waits for nothing never comes near it
SLICE_S = 0.05  # how often a long call's accounts are read (a short call is never read twice)
SETUP_BUDGET_S = 30.0  # to import the submission (and the engine) in a fresh child
# Added when a call hands the child a real vocabulary it has not built yet (building Tekken from its files takes
# about 1 s of CPU here). The course's own byte, bpe and spm tokenizers build in milliseconds: nothing for them.
FIRST_LOAD_BUDGET_S = {"mistral": 20.0, "tekken": 20.0}
PER_BATCHED_CALL_S = 0.01  # each further call of a batch (mini_vllm.sandbox.each): honest ones take microseconds
INTERRUPT_GRACE_S = 0.5  # wall seconds a call over budget has to answer the interrupt before its child is killed
# What the trusted side may spend serving graded code's requests (a served decode or step, a reference stage it
# composes) in one test. Each served request also counts against its call's budget, and is stopped there; this
# bounds what many calls of one test add up to.
SERVED_PER_TEST_S = 60.0
SERVE_SLACK_S = 0.05  # a served request is stopped this far past what is left of its budget
RECORDED_FROM_S = 0.002  # a call that lasted longer (wall) has its CPU time kept in results.json's call_costs

# ------------------------------------------------------------------ how often before a lab or a name is given up

TIMEOUTS_PER_LAB = 5  # a lab whose calls ran out this often is not called again in the run (bounds a hang's cost)
DEATHS_PER_NAME = 3  # a name that ended its process this often is not called again in the run

_lab_budgets: dict[str, float] = {}  # lab number -> CPU seconds per call (grading.toml, via configure)
_default = [DEFAULT_BUDGET_S]


def configure(per_lab: dict[str, float], default: float) -> None:
    """grading.toml's budgets (conftest.py passes them): CPU seconds per call, by lab number, and the default."""
    _lab_budgets.clear()
    _lab_budgets.update(per_lab)
    _default[0] = default


def cpu_budget_s(number: str) -> float:
    """CPU seconds one call into lab ``number`` may use (``LAB_CALL_BUDGET_S`` overrides every lab's)."""
    override = os.environ.get("LAB_CALL_BUDGET_S")
    if override:
        return float(override)
    return _lab_budgets.get(number, _default[0])
