"""Find each lab's ``starter.py`` in what a student uploaded.

A student uploads their copy of the release: the whole repository, or a zip of it, possibly one
folder deep (``my-course/phase-16-serving-apis-and-parsers/...``). Each lab's file is looked for
at its path in the release, then as the lab's folder alone (``lab-08-structured-outputs/starter.py``),
and, when the assignment grades one lab only, as a lone ``starter.py``. What is found is copied to a
folder of the grader's (the student's upload is never graded in place), and only regular files reached
without leaving the upload are taken: a symbolic link (to the file, or to a folder on its way) could
point at the grader's own files or at another student's.

A zip is unpacked without what a working copy collects and grading never reads (``.venv``, ``.git``,
caches: :data:`IGNORED_DIRS`), before its size is checked; one still too large is not unpacked, and
the student reads what made it so.
"""

from __future__ import annotations

import shutil
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from instructor.autograder import labnames
from mini_vllm.labs import LABS_DIR, REPO_ROOT

LABS_IN_RELEASE = LABS_DIR.relative_to(REPO_ROOT)  # phase-16-serving-apis-and-parsers/labs
MAX_UNZIPPED_BYTES = 256 * 2**20  # a release is a few MB; anything far larger is not one
MAX_UNZIPPED_FILES = 20_000
# Folders of a working copy that grading never reads: skipped inside a zip before its size is counted
# (a .venv that `make grade` made is 0.9 GB in 40,000 files; the course itself is a few MB).
IGNORED_DIRS = frozenset({".venv", "venv", ".git", "__pycache__", ".hypothesis", "node_modules", ".pytest_cache",
                          ".mypy_cache", ".ruff_cache", ".ipynb_checkpoints", "__MACOSX"})


class UploadTooLarge(ValueError):
    """A zip that, without IGNORED_DIRS, is still far larger than a copy of the course (the message says why)."""


@dataclass(frozen=True)
class Found:
    lab: str  # the lab's folder name, e.g. lab-03-streaming-detokenizer
    file: Path | None  # the grader's copy of the student's file; None when missing
    looked_for: str  # the path in the release
    found_at: str | None = None  # where it was, relative to the upload
    problem: str = ""  # why it is missing, in a sentence for the student
    other_lab: bool = False  # what was found is another lab's file (labnames): not graded as this lab's

    @property
    def number(self) -> str:
        return self.lab[4:6]


def course_labs() -> list[str]:
    return sorted(p.name for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-"))


def unpack_zips(upload: Path, into: Path) -> tuple[list[Path], list[str]]:
    """Unpack every ``.zip`` at the top of ``upload`` into ``into`` (safely): the folders made, and a
    sentence for each zip that could not be used."""
    made, problems = [], []
    for archive in sorted(upload.glob("*.zip")):
        if archive.is_symlink() or not archive.is_file():
            continue
        target = into / archive.stem
        try:
            _safe_unzip(archive, target)
        except UploadTooLarge as error:
            problems.append(str(error))
            continue
        except (zipfile.BadZipFile, OSError, ValueError) as error:
            problems.append(f"{archive.name} could not be unpacked ({type(error).__name__}: {error}); "
                            "make a new zip of your copy of the course")
            continue
        made.append(target)
    return made, problems


def _ignored(name: PurePosixPath) -> bool:
    return any(part in IGNORED_DIRS for part in name.parts[:-1])


def _safe_unzip(archive: Path, target: Path) -> None:
    """Extract regular files only, never outside ``target``, never IGNORED_DIRS, within a size and count budget."""
    with zipfile.ZipFile(archive) as zipped:
        members = [m for m in zipped.infolist() if not m.is_dir() and not _ignored(PurePosixPath(m.filename))]
        _check_size(archive, members)
        for member in members:
            name = PurePosixPath(member.filename)
            mode = member.external_attr >> 16
            if name.is_absolute() or ".." in name.parts or (stat.S_IFMT(mode) and not stat.S_ISREG(mode)):
                continue  # directories are made as needed; links and escapes are never extracted
                # (a zip that records permissions but no file type, as Python's writestr does, holds files)
            destination = target.joinpath(*name.parts)
            destination.parent.mkdir(parents=True, exist_ok=True)
            with zipped.open(member) as source, destination.open("wb") as out:
                _copy_at_most(source, out, member.file_size)


def _check_size(archive: Path, members: list[zipfile.ZipInfo]) -> None:
    total = sum(m.file_size for m in members)
    if len(members) <= MAX_UNZIPPED_FILES and total <= MAX_UNZIPPED_BYTES:
        return
    by_folder: dict[str, list[int]] = {}
    for member in members:
        parts = PurePosixPath(member.filename).parts
        # The folder that holds the bulk: below a single top folder (the course's own), its first level.
        key = "/".join(parts[:2]) + "/" if len(parts) > 2 else parts[0]
        entry = by_folder.setdefault(key, [0, 0])
        entry[0] += member.file_size
        entry[1] += 1
    too_many = total <= MAX_UNZIPPED_BYTES  # then the count is what broke the limit: name the folders by it
    largest = sorted(by_folder.items(), key=lambda item: -item[1][1] if too_many else -item[1][0])[:3]
    named = ", ".join(f"{name} ({size / 2**20:.0f} MB, {count:,} file{'s' * (count != 1)})"
                      for name, (size, count) in largest)
    raise UploadTooLarge(
        f"{archive.name} was not unpacked: even without {', '.join(sorted(IGNORED_DIRS - {'__MACOSX'}))} it holds "
        f"{total / 2**20:.0f} MB in {len(members):,} files, and a copy of the course is a few MB "
        f"(the limit is {MAX_UNZIPPED_BYTES // 2**20} MB and {MAX_UNZIPPED_FILES:,} files). "
        f"{'Most files' if too_many else 'Largest'}: {named}. "
        "Zip your copy without those, or upload the labs' folders only")


def _copy_at_most(source: Any, out: Any, size: int) -> None:
    """Copy no more than the size the zip declared (a member that decompresses to more is cut, not trusted)."""
    left = size
    while left > 0:
        chunk = source.read(min(left, 1 << 20))
        if not chunk:
            return
        out.write(chunk)
        left -= len(chunk)


def candidate_roots(upload: Path, unpacked: list[Path]) -> list[Path]:
    """Where a copy of the release may begin: the upload itself, an unpacked zip, or one folder below either."""
    roots = []
    for top in [upload, *unpacked]:
        roots.append(top)
        if top.is_dir():
            roots += sorted(p for p in top.iterdir() if p.is_dir() and not p.is_symlink()
                            and not p.name.startswith((".", "__MACOSX")) and p.name not in IGNORED_DIRS)
    return roots


def places(lab: str, alone: bool) -> list[str]:
    """Where a lab's file may sit in an upload, most specific first: its path in the release, its folder
    alone, and (when the assignment grades this lab only) a lone starter.py."""
    return [str(LABS_IN_RELEASE / lab / "starter.py"), f"{lab}/starter.py", *(["starter.py"] if alone else [])]


def locate(upload: Path, staging: Path, labs: list[str] | None = None) -> list[Found]:
    """Each lab graded (``labs``, default every lab of the course): the student's file, copied into
    ``staging``, or why there is none."""
    labs = labs if labs is not None else course_labs()
    unpacked, zip_problems = unpack_zips(upload, staging / "unzipped")
    roots = candidate_roots(upload, unpacked)
    found = []
    for lab in labs:
        looked_for = places(lab, alone=len(labs) == 1)
        hit = next((root / place for place in looked_for for root in roots
                    if (root / place).exists() or (root / place).is_symlink()), None)
        if hit is None:
            found.append(Found(lab, None, looked_for[0], problem=_missing(lab, looked_for, upload, zip_problems)))
            continue
        shown = _relative(hit, upload, staging)
        if hit.is_symlink() or not hit.is_file():
            found.append(Found(lab, None, looked_for[0], shown,
                               problem=f"{lab}: {shown} is not a regular file (a link?), so it was not graded"))
            continue
        if not _inside(hit, [upload, staging / "unzipped"]):
            found.append(Found(lab, None, looked_for[0], shown,
                               problem=f"{lab}: {shown} leads out of your upload through a link (a linked folder), "
                                       "so it was not graded: upload the files themselves"))
            continue
        copy = staging / "labs" / lab / "starter.py"
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(hit, copy)
        wrong = labnames.other_lab(copy, lab)
        if wrong:
            copy.unlink()
            found.append(Found(lab, None, looked_for[0], shown, other_lab=True,
                               problem=f"{lab}: {shown} is a file of another lab: {wrong}. Upload {lab[:6]}'s "
                                       "starter.py to this assignment"))
            continue
        found.append(Found(lab, copy, looked_for[0], shown))
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


def _missing(lab: str, looked_for: list[str], upload: Path, zip_problems: list[str]) -> str:
    top = sorted(p.name + ("/" if p.is_dir() else "") for p in upload.iterdir())[:12] if upload.is_dir() else []
    holds = ", ".join(top) if top else "nothing"
    where = " or ".join(looked_for)
    zips = "".join(f" {problem}." for problem in zip_problems)
    return (f"{lab}: no starter.py found. Looked for {where} at the top of your upload, one folder down, "
            f"and inside a zip at its top; your upload's top level holds: {holds}.{zips} Upload your copy of the "
            "course (or a zip of it, without .venv).")


def missing_lab_module(found: Found, staging: Path) -> Path:
    """A stand-in for a missing lab: a module that fails to import with the reason, so the lab scores 0 saying why."""
    stand_in = staging / "missing" / f"{found.lab}.py"
    stand_in.parent.mkdir(parents=True, exist_ok=True)
    stand_in.write_text(f"raise ImportError({found.problem!r})\n", encoding="utf-8")
    return stand_in
