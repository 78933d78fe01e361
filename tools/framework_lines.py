"""The line, at each release tag, of every place a framework fact was read (or 0: absent).

    python tools/framework_lines.py deepspeed REPO TAG [TAG ...]
    python tools/framework_lines.py megatron REPO TAG [TAG ...]
    python tools/framework_lines.py megatron-do REPO TAG [TAG ...]

REPO is a clone of microsoft/DeepSpeed (tags ``v0.14.4``) or NVIDIA/Megatron-LM (tags
``core_v0.13.1``). For each tag it prints the row of ``_DS_LINES`` or ``_MEG_LINES`` in
``sim/profiles/frameworks.py`` (keyed by the version without its prefix): the line of each
place of ``_DS_ANCHORS`` (the nth occurrence of its code in its file under
``deepspeed/runtime/``) or ``_MEG_ANCHORS`` (the first occurrence after the place it
follows, in its file under ``megatron/``); ``megatron-do`` the distributed optimizer's
``_MEG_DO_LINES`` of ``_MEG_DO_ANCHORS`` alike. A new release is added by pasting its row and
reading, at the tag, every fact whose code moved or went (``git diff`` from the last tag
read); ``tests/test_profiles_frameworks.py`` checks every row against the clone with
:func:`lines`.
"""

from __future__ import annotations

import subprocess
import sys

from sim.profiles.frameworks import _DS_ANCHORS, _MEG_ANCHORS, _MEG_DO_ANCHORS

#: per framework: the tag's prefix and the folder its anchors' files are under
KINDS = {"deepspeed": ("v", "deepspeed/runtime"), "megatron": ("core_v", "megatron"),
         "megatron-do": ("core_v", "megatron")}


def _show(repo: str, tag: str, path: str) -> list[str]:
    out = subprocess.run(["git", "-C", repo, "show", f"{tag}:{path}"], capture_output=True,
                         text=True)
    return out.stdout.splitlines()  # a file absent at the tag: no lines


def lines(kind: str, repo: str, version: str, anchors: tuple | None = None,
          tag: str | None = None) -> tuple[int, ...]:
    """The line of each anchor of ``kind`` at the tag of ``version`` (0: absent), or at the
    revision ``tag`` where given (Megatron-LM 0.20.0's d98e8a64dd, no tag); ``anchors``
    another table of the kind's form (Megatron-LM's attention facts, ``_MEG_ATTN_ANCHORS``)."""
    prefix, root = KINDS[kind]
    tag = prefix + version if tag is None else tag
    files: dict[str, list[str]] = {}
    at: dict[str, int] = {}
    if anchors is None:
        anchors = {"deepspeed": _DS_ANCHORS, "megatron": _MEG_ANCHORS,
                   "megatron-do": _MEG_DO_ANCHORS}[kind]
    for name, path, code, where in anchors:
        text = files.setdefault(path, _show(repo, tag, f"{root}/{path}"))
        if kind == "deepspeed":  # where: the occurrence (1: the first)
            found = [i + 1 for i, t in enumerate(text) if code in t]
            at[name] = found[where - 1] if len(found) >= where else 0
        else:  # where: the anchor it follows ("": the file's start); after an absent one, absent
            start = at[where] if where else 0
            found = [i + 1 for i, t in enumerate(text) if code in t and i + 1 > start]
            at[name] = found[0] if found and (start or not where) else 0
    return tuple(at.values())


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in KINDS:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    kind, repo, *tags = argv
    prefix = KINDS[kind][0]
    for tag in tags:
        version = tag[len(prefix):] if tag.startswith(prefix) else tag
        print(f'    "{version}": {lines(kind, repo, version)},')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
