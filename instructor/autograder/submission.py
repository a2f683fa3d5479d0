"""Find each lab's ``starter.py`` in what a student uploaded.

A student uploads their copy of the release: the whole repository, or a zip of it, possibly one
folder deep (``my-course/phase-16-serving-apis-and-parsers/...``). Each lab's file is looked for
at its path in the release. What is found is copied to a folder of the grader's (the student's
upload is never graded in place), and only regular files reached without leaving the upload are
taken: a symbolic link (to the file, or to a folder on its way) could point at the grader's own
files or at another student's.
"""

from __future__ import annotations

import shutil
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mini_vllm.labs import LABS_DIR, REPO_ROOT

LABS_IN_RELEASE = LABS_DIR.relative_to(REPO_ROOT)  # phase-16-serving-apis-and-parsers/labs
MAX_UNZIPPED_BYTES = 256 * 2**20  # a release is a few MB; anything far larger is not one
MAX_UNZIPPED_FILES = 20_000


@dataclass(frozen=True)
class Found:
    lab: str  # the lab's folder name, e.g. lab-03-streaming-detokenizer
    file: Path | None  # the grader's copy of the student's file; None when missing
    looked_for: str  # the path in the release
    found_at: str | None = None  # where it was, relative to the upload
    problem: str = ""  # why it is missing, in a sentence for the student

    @property
    def number(self) -> str:
        return self.lab[4:6]


def course_labs() -> list[str]:
    return sorted(p.name for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-"))


def unpack_zips(upload: Path, into: Path) -> list[Path]:
    """Unpack every ``.zip`` at the top of ``upload`` into ``into`` (safely), returning the folders made."""
    made = []
    for archive in sorted(upload.glob("*.zip")):
        if archive.is_symlink() or not archive.is_file():
            continue
        target = into / archive.stem
        try:
            _safe_unzip(archive, target)
        except (zipfile.BadZipFile, OSError, ValueError):
            continue  # not a usable zip: the labs are then reported missing, with what was looked for
        made.append(target)
    return made


def _safe_unzip(archive: Path, target: Path) -> None:
    """Extract regular files only, never outside ``target``, within a size and count budget."""
    with zipfile.ZipFile(archive) as zipped:
        members = zipped.infolist()
        if len(members) > MAX_UNZIPPED_FILES or sum(m.file_size for m in members) > MAX_UNZIPPED_BYTES:
            raise ValueError(f"{archive.name} is larger than a copy of the course")
        for member in members:
            name = PurePosixPath(member.filename)
            mode = member.external_attr >> 16
            if member.is_dir() or name.is_absolute() or ".." in name.parts or (mode and not stat.S_ISREG(mode)):
                continue  # directories are made as needed; links and escapes are never extracted
            destination = target.joinpath(*name.parts)
            destination.parent.mkdir(parents=True, exist_ok=True)
            with zipped.open(member) as source, destination.open("wb") as out:
                shutil.copyfileobj(source, out)


def candidate_roots(upload: Path, unpacked: list[Path]) -> list[Path]:
    """Where a copy of the release may begin: the upload itself, an unpacked zip, or one folder below either."""
    roots = []
    for top in [upload, *unpacked]:
        roots.append(top)
        if top.is_dir():
            roots += sorted(p for p in top.iterdir() if p.is_dir() and not p.is_symlink()
                            and not p.name.startswith((".", "__MACOSX")))
    return roots


def locate(upload: Path, staging: Path) -> list[Found]:
    """Each lab of the course: the student's file, copied into ``staging``, or why there is none."""
    unpacked = unpack_zips(upload, staging / "unzipped")
    roots = candidate_roots(upload, unpacked)
    found = []
    for lab in course_labs():
        looked_for = str(LABS_IN_RELEASE / lab / "starter.py")
        hit = next((root / looked_for for root in roots if (root / looked_for).exists()
                    or (root / looked_for).is_symlink()), None)
        if hit is None:
            found.append(Found(lab, None, looked_for, problem=_missing(lab, looked_for, upload)))
            continue
        shown = _relative(hit, upload, staging)
        if hit.is_symlink() or not hit.is_file():
            found.append(Found(lab, None, looked_for, shown,
                               problem=f"{lab}: {shown} is not a regular file (a link?), so it was not graded"))
            continue
        if not _inside(hit, [upload, staging / "unzipped"]):
            found.append(Found(lab, None, looked_for, shown,
                               problem=f"{lab}: {shown} leads out of your upload through a link (a linked folder), "
                                       "so it was not graded: upload the files themselves"))
            continue
        copy = staging / "labs" / lab / "starter.py"
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(hit, copy)
        found.append(Found(lab, copy, looked_for, shown))
    return found


def _inside(path: Path, folders: list[Path]) -> bool:
    """Whether ``path``, every link on its way followed, is still inside one of ``folders``."""
    real = path.resolve()
    return any(real.is_relative_to(folder.resolve()) for folder in folders)


def _relative(path: Path, upload: Path, staging: Path) -> str:
    for base, label in ((upload, ""), (staging / "unzipped", "(in your zip) ")):
        try:
            return label + str(path.relative_to(base))
        except ValueError:
            continue
    return str(path)


def _missing(lab: str, looked_for: str, upload: Path) -> str:
    top = sorted(p.name + ("/" if p.is_dir() else "") for p in upload.iterdir())[:12] if upload.is_dir() else []
    holds = ", ".join(top) if top else "nothing"
    return (f"{lab}: no starter.py found. Looked for {looked_for} at the top of your upload, one folder down, "
            f"and inside a zip at its top; your upload's top level holds: {holds}. Upload your whole copy of "
            "the course (or a zip of it).")


def missing_lab_module(found: Found, staging: Path) -> Path:
    """A stand-in for a missing lab: a module that fails to import with the reason, so the lab scores 0 saying why."""
    stand_in = staging / "missing" / f"{found.lab}.py"
    stand_in.parent.mkdir(parents=True, exist_ok=True)
    stand_in.write_text(f"raise ImportError({found.problem!r})\n", encoding="utf-8")
    return stand_in
