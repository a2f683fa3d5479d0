"""The grading child, started by the trusted side (:mod:`mini_vllm.sandbox.remote`) with its pipes and walls.

It starts inside its walls (:mod:`mini_vllm.sandbox.isolation`), sets its own limits before it
reads a line of the submission, then serves the trusted side's requests until the channel closes. The first request,
``ready``, only answers (the trusted side then reads the child's memory before any graded code has run); the
second, ``setup``, brings the submission's sources as text (the child never reads them from the course),
writes them to its own ``/tmp`` and imports the lab under test.

Inside, ``mini_vllm.labs.load_lab`` is replaced: a lab of the submission loads from those
files; any other lab is either refused, or (``compose: "reference"``) a proxy to the reference
held by the trusted side, so a composing lab's points depend on its own file only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from mini_vllm.sandbox.lenders import Lender
from mini_vllm.sandbox.peer import Peer

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    read_fd, write_fd, control_fd = (int(a) for a in argv[:3])
    walls = json.loads(argv[3])
    from mini_vllm.sandbox import isolation

    isolation.limit_self(walls["processes"])  # the walls themselves were made before this process started
    os.chdir(walls["workdir"])
    _watch_for_interrupts(control_fd)

    from mini_vllm.sandbox.peer import CHILD, REQUEST, ChannelClosed

    for family in walls.get("warm", []):  # the trusted side's tokenizers, loaded before any request (and any
        rebuild_family(family)  # student code): the memory baseline read at "ready" includes them
    child = Child(Path(walls["workdir"]))
    peer = StudentPeer(CHILD, read_fd, write_fd, ChildLender(child), rebuild_family)
    child.peer = peer
    while True:
        try:
            message = peer.receive(None)
        except ChannelClosed:
            return 0
        except KeyboardInterrupt:  # an interrupt that arrived between calls: nothing to stop
            continue
        if message[0] != REQUEST:
            continue  # the late reply to a callback whose call was interrupted
        try:
            peer.serve(message)
        except ChannelClosed:
            return 0
        except KeyboardInterrupt:
            continue


def _watch_for_interrupts(control_fd: int) -> None:
    """A byte on the control pipe: the trusted side's budget ran out, so stop the call in progress.

    A real SIGINT (not a flag) so a blocking ``sleep`` or ``read`` is interrupted too. Code that
    ignores it is killed by the trusted side a moment later.
    """
    main_thread = threading.main_thread().ident
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def watch() -> None:
        while os.read(control_fd, 1):
            signal.pthread_kill(main_thread, signal.SIGINT)  # type: ignore[arg-type]

    threading.Thread(target=watch, daemon=True, name="sandbox-interrupts").start()


def rebuild_family(name: str) -> Any:
    from mini_vllm.tokenizers.families import load_tokenizer_cached

    return load_tokenizer_cached(name)


class Child:
    """The submission as this process sees it: its sources, the lab under test, how others load."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.sources: dict[str, Path] = {}
        self.references: dict[str, Path] = {}
        self.modules: dict[Path, ModuleType] = {}
        self.served: set[str] = set()
        self.lab = ""
        self.peer: Any = None
        self.shown_paths: dict[str, str] = {}

    def setup(self, lab: str, sources: dict[str, list[str]], references: dict[str, list[str]], served: list[str],
              env: dict[str, str]) -> list[str]:
        os.environ.update(env)
        self.lab, self.served = lab, set(served)
        for number, (shown, text) in sources.items():
            self.sources[number] = self._write(f"lab_{number}", shown, text)
        for number, (shown, text) in references.items():
            self.references[number] = self._write(f"reference_{number}", shown, text)
        import mini_vllm.labs as labs

        labs.load_lab = self.load_lab
        labs.impl_path = self.impl_path
        module = self.load_lab(lab)
        return sorted(name for name in vars(module) if not name.startswith("_"))

    def _write(self, folder: str, shown: str, text: str) -> Path:
        path = self.scratch / folder / Path(shown).name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        self.shown_paths[str(path)] = shown
        return path

    def impl_path(self, lab: str, impl: str | None = None) -> Path:
        from mini_vllm.labs import lab_number

        number = lab_number(lab)
        if impl == "solution":
            if number in self.references:
                return self.references[number]
            raise FileNotFoundError(f"the reference solution of lab-{number} is not available to graded code")
        if number in self.sources:
            return self.sources[number]
        raise FileNotFoundError(f"lab-{number} is not part of this submission")

    def load_lab(self, lab: str, impl: str | None = None) -> Any:
        from mini_vllm.labs import lab_number

        number = lab_number(lab)
        if impl != "solution" and number not in self.sources and number in self.served:
            from mini_vllm.sandbox.remote import ReferenceLab

            return ReferenceLab(self.peer, number)
        path = self.impl_path(lab, impl)
        module = self.modules.get(path)
        if module is None:
            from mini_vllm.labs import import_file

            name = f"mini_vllm_labs.lab_{number}.{'solution' if impl == 'solution' else 'submission'}"
            module = self.modules[path] = import_file(name, path)
        return module

    def resolve(self, path: list[str]) -> Any:
        module: Any = self.load_lab(self.lab)
        target = module
        for name in path:
            if target is module and not hasattr(module, name):  # Python's message names the module as loaded
                raise AttributeError(f"your lab-{self.lab} file defines no {name!r} (is it this lab's file?)")
            target = getattr(target, name)
        return target


class ChildLender(Lender):
    """The child lends freely (it is the student's process) and serves the lab's names by path."""

    def __init__(self, child: Child) -> None:
        self.child = child

    def serve(self, obj: Any, method: Any, args: Any) -> Any:
        raise PermissionError("the grading child serves no declared interface")

    def call_path(self, path: list[str], args: list[Any], kwargs: dict[str, Any]) -> Any:
        if path == ["__setup__"]:
            return self.child.setup(*args, **kwargs)
        if path == ["__ready__"]:  # nothing of the submission has run yet: the trusted side reads a baseline
            return None
        return self.child.resolve(path)(*args, **kwargs)


def _student_frames(error: BaseException, shown_paths: dict[str, str]) -> str:
    """The traceback from the first frame of graded code on, with the files named as the student knows them."""
    frames = traceback.extract_tb(error.__traceback__)
    sandbox = str(HERE)
    loader = str(HERE.parent / "labs.py")  # import_file: the grader's frame, not the student's
    kept = [f for f in frames if not f.filename.startswith((sandbox, "<frozen")) and f.filename != loader]
    for frame in kept:
        frame.filename = shown_paths.get(frame.filename, frame.filename)
    lines = traceback.format_list(kept[-12:])
    if isinstance(error, SyntaxError):  # where in the file: the line and the caret under it
        if error.filename in shown_paths:
            error.filename = shown_paths[error.filename]
        lines += traceback.format_exception_only(type(error), error)[:-1]
    if not lines:
        return ""
    return "Traceback in the graded code (most recent call last):\n" + "".join(lines).rstrip()


class StudentPeer(Peer):
    def annotate(self, error: BaseException) -> None:
        lender = self.lender
        shown = lender.child.shown_paths if isinstance(lender, ChildLender) else {}
        with contextlib.suppress(Exception):  # a traceback we cannot format is no reason to lose the error
            error.sandbox_traceback = _student_frames(error, shown)  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
