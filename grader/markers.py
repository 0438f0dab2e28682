"""`markers` are the kit's own words that open a part of a message: a test's hint, a known mistake's diagnosis.

A message is what a student reads, so the markers are translated with it ("Hint: ..." is "提示：..." in
Chinese). The trusted side still finds them in a message already written (scoring drops a hint whose ground
another failure takes away; the terminal says a repeated hint once), so each marker is matched in every
language the kit speaks, never only in English.
"""

from __future__ import annotations

import functools
import re

from grader.lang import N_, every_language, tr

HINT = N_("Hint: {hint}")
DIAGNOSIS = N_("Diagnosis: {diagnosis}")


def hint(text: str) -> str:
    """"Hint: <text>" in the language in use."""
    return tr(HINT, hint=text)


def hint_suffix(text: str) -> str:
    """" Hint: <text>", or "" without one: what closes a test's message when it says what may cause the symptom."""
    return f" {hint(text)}" if text else ""


def diagnosis(text: str) -> str:
    """"Diagnosis: <text>" in the language in use: a known mistake named, on a line of its own."""
    return tr(DIAGNOSIS, diagnosis=text)


@functools.cache
def _frames(template: str, field: str) -> tuple[tuple[str, str], ...]:
    """What comes before and after `{field}` in `template`, as each language writes it."""
    parts = [text.partition("{" + field + "}") for text in every_language(template)]
    return tuple((opening, closing) for opening, _, closing in parts)


def _unframed(text: str, template: str, field: str) -> str | None:
    """The field's text where `text` is `template` filled in, in any language; None where it is not."""
    for opening, closing in _frames(template, field):
        if text.startswith(opening) and text.endswith(closing) and len(text) >= len(opening) + len(closing):
            return text[len(opening):len(text) - len(closing)]
    return None


@functools.cache
def hint_pattern() -> re.Pattern[str]:
    """A message's closing hint, to the end of its line, in any language: " Hint: ...", " 提示：..."."""
    openings = "|".join(re.escape(opening) for opening, _ in _frames(HINT, "hint"))
    return re.compile(rf" (?:{openings}).*$", re.MULTILINE)


def split_hint(message: str) -> tuple[str, str]:
    """(what precedes the message's last hint, the hint's text); (message, "") when it has none on its last line."""
    found = next(reversed(list(hint_pattern().finditer(message))), None)
    if found is None or found.end() != len(message):
        return message, ""
    text = _unframed(found.group(0)[1:], HINT, "hint")
    return (message, "") if text is None else (message[:found.start()], text)


def diagnoses(message: str) -> list[str]:
    """The known mistakes a message names on lines of their own, their text without the marker."""
    return [text for line in message.splitlines() if (text := _unframed(line, DIAGNOSIS, "diagnosis")) is not None]


def is_diagnosis(text: str) -> bool:
    return bool(text) and bool(diagnoses(text.splitlines()[0]))
