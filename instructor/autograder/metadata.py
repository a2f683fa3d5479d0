"""Who each submission is from, as Gradescope's metadata says, and what of it does not match the folders.

Gradescope's "Export Submissions" has one folder per submission (``submission_NNN``) and, beside them,
``submission_metadata.yml``, which names each folder's submitters in Ruby-style YAML (``:submitters:``
with ``:name:``, ``:sid:``, ``:email:``). The autograder's own form, ``submission_metadata.json`` in a
submission's folder, is read where the YAML does not name the folder. The YAML wins: Gradescope wrote it,
outside the student's upload.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml  # PyYAML: in the locked dev packages (openai-agents and mcp need it), which grade-batch's .venv holds

METADATA = "submission_metadata.json"  # the autograder's form of Gradescope's metadata, in a submission's folder
# Gradescope's "Export Submissions": one folder per submission (submission_NNN) and, beside them, this
# file, which names each folder's submitters in Ruby-style YAML (`:submitters:` with `:name:`, `:sid:`, `:email:`).
EXPORT_METADATA = "submission_metadata.yml"


@dataclass(frozen=True)
class Submitter:
    """Who a submission is from, as Gradescope's metadata says (a group submission: every member, joined)."""

    name: str = ""
    email: str = ""
    sid: str = ""


def submitters(entry: Path) -> Submitter:
    """The ``users`` of ``entry``'s ``submission_metadata.json``; empty fields without one (or an unreadable one)."""
    try:
        users = json.loads((entry / METADATA).read_text(encoding="utf-8")).get("users", [])
    except (OSError, ValueError, AttributeError):
        return Submitter()
    return _joined(users)


def _joined(users: object) -> Submitter:
    """One Submitter for a submission's users (a group's names, emails and SIDs each joined with ``; ``)."""
    if not isinstance(users, list):
        return Submitter()

    def field(key: str) -> str:
        return "; ".join(str(user.get(key) or "") for user in users if isinstance(user, dict))

    return Submitter(field("name"), field("email"), field("sid"))


class _ExportLoader(yaml.SafeLoader):
    """Safe YAML that reads a Ruby-tagged value (``!ruby/object:BigDecimal``, in a score) as nothing."""


_ExportLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def export_submitters(submissions: Path) -> dict[str, Submitter]:
    """Per submission folder, its submitters as the export's ``submission_metadata.yml`` names them ({} without it)."""
    try:
        export = yaml.load((submissions / EXPORT_METADATA).read_text(encoding="utf-8"), Loader=_ExportLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    if not isinstance(export, dict):
        return {}
    who = {}
    for folder, record in export.items():
        users = record.get(":submitters") if isinstance(record, dict) else None
        if isinstance(users, list):
            who[str(folder)] = _joined([{str(key).lstrip(":"): value for key, value in user.items()}
                                        for user in users if isinstance(user, dict)])
    return who


def who_submitted(submissions: Path, class_list: list[tuple[str, Path]]) -> dict[str, Submitter]:
    """Each submission's submitters: from the export's YAML where it names the folder (Gradescope wrote it, outside
    the student's upload), else from a ``submission_metadata.json`` in the folder, else nobody (the folder's name)."""
    export = export_submitters(submissions)
    return {name: export.get(entry.name) or export.get(entry.stem) or submitters(entry) for name, entry in class_list}


def metadata_warnings(submissions: Path, class_list: list[tuple[str, Path]]) -> list[str]:
    """What does not match between the metadata and the folders, each a sentence naming them: an entry of
    ``submission_metadata.yml`` with no folder (an export cut short, or the wrong folder), and a folder that no
    metadata names (its row has the folder's name only)."""
    export = export_submitters(submissions)
    entries = {entry.name for _, entry in class_list} | {entry.stem for _, entry in class_list}
    warnings = []
    orphans = sorted(set(export) - entries)
    if orphans:
        warnings.append(f"grade-batch: warning: {EXPORT_METADATA} names {len(orphans)} submission(s) with no folder "
                        f"in {submissions}: {', '.join(orphans)} (not graded)")
    unnamed = sorted(name for name, entry in class_list
                     if entry.name not in export and entry.stem not in export and submitters(entry) == Submitter())
    if unnamed:
        warnings.append(f"grade-batch: warning: no metadata names {len(unnamed)} submission(s): {', '.join(unnamed)} "
                        f"(neither {EXPORT_METADATA} beside them nor a {METADATA} inside; their rows have no name, "
                        "email or SID)")
    return warnings
