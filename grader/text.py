"""`text` makes strings a submission chose safe to show: on a terminal, in JSON, in a spreadsheet.

A submission chooses its exception messages, what it prints, its file and folder names. Shown raw,
an escape sequence in one of them clears the screen and draws a fake score table; a lone surrogate
makes printing fail. `clean` turns every control character into the visible escape Python would
write for it (`\\x1b`, `\\r`), keeping only newlines, and every lone surrogate into U+FFFD.

Names a person reads must also be told apart: `bob`, `bοb` (Greek omicron) and `bоb` (Cyrillic o) are
three folders and one name to the eye. `skeleton` is what a name looks like, Unicode's confusables folded
(UTS #39, through the `disarm` library's tables), for checking that two names differ visibly.
"""

from __future__ import annotations

import re
import sys
import unicodedata

REPLACEMENT = "\ufffd"
# C0 and C1 controls and DEL (ESC and CSI start every terminal escape sequence), the separators that
# end a line without a newline, the bidirectional overrides that reorder what is shown, surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
# What an id keeps of a name: letters, digits, `_`, `.` and `-` (never first), within a file name's length.
_NOT_IN_ID = re.compile(r"[^\w.-]")
MAX_ID_BYTES = 150
# OWASP's rule for CSV injection: a cell starting with one of these is read as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if "\ud800" <= char <= "\udfff":
        return REPLACEMENT
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def clean(text: str, *, newlines: bool = True) -> str:
    """`text` with no control characters, escape sequences or lone surrogates; newlines kept if `newlines`."""
    return (_UNSAFE_BUT_NEWLINE if newlines else _UNSAFE).sub(_visible, text)


# Letters Unicode says to show as nothing (Default_Ignorable_Code_Point): an id made of them reads as blank.
_IGNORABLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0") | frozenset(
    chr(c) for c in (*range(0x180B, 0x1810), *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)))
# Right-to-left letters and Arabic digits: beside digits and punctuation, the same characters in another order can
# display alike (`דנה_2` and `2_דנה`), so no id keeps them; the report keeps the name as given.
_RIGHT_TO_LEFT = frozenset(("R", "AL", "AN"))


def id_of(name: str) -> str:
    """`name` made safe as a file name and a spreadsheet cell: equal to `name` exactly when it was already safe.

    Compatibility forms are written plainly first (NFKC: `ｂｏｂ` is `bob`, a decomposed `é` one letter); letters that
    show as nothing and right-to-left ones become `_` (an id must read as what it is, in one order)."""
    safe = _NOT_IN_ID.sub("_", unicodedata.normalize("NFKC", name))
    safe = "".join("_" if ch in _IGNORABLE or unicodedata.bidirectional(ch) in _RIGHT_TO_LEFT else ch for ch in safe)
    if safe[:1] in (".", "-"):  # a hidden file, an option to every shell command, a formula
        safe = "_" + safe[1:]
    while len(safe.encode()) > MAX_ID_BYTES:
        safe = safe[:-1]
    return safe or "_"


def skeleton(name: str) -> str:
    """What `name` looks like, for telling names apart, never for showing: equal for `bob`, `bοb` (Greek omicron),
    `bоb` (Cyrillic o), `BOB` and `ｂｏｂ`.

    UTS #39's skeleton (after NFKC, Unicode's confusables folded to their prototype, invisible characters
    dropped), case folded, with its digit classes (`0` looks like `O`, `1` like `l`)."""
    from disarm import skeleton_key  # here, not at the top: only `grader batch` tells names apart

    return skeleton_key(unicodedata.normalize("NFKC", name), digit_policy="tr39")


def spreadsheet_cell(text: str) -> str:
    """A text cell no spreadsheet runs as a formula: one that starts like one gets a leading `'`."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def tolerant_output() -> None:
    """Make stdout and stderr replace what their encoding cannot encode (PYTHONIOENCODING=ascii) instead of failing."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
