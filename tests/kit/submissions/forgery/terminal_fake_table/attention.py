"""Forgery: an error message that clears the terminal and draws a full-marks table over the real one.

Every line of the fake starts with an escape sequence, so that wherever it is shown quoted (as the
grader must show it) the line carries a visible `\\x1b[`; a line without one is the fake drawn raw.
"""

FAKE = (
    "\x1b[2J\x1b[3J\x1b[H\x9b2J"  # clear the screen and the scroll-back (and again, by the 8-bit CSI)
    "\x1b]0;FORGED-TITLE\x1b\\\u202e\u202c"  # the terminal window's title; right-to-left, and back
    "\x1b[1G┃ Exercise  ┃ Tests ┃ Points ┃ Status    ┃\r\n"
    "\x1b[1G│ attention │ 12/12 │ 10/10  │ ✔ done    │\r\n"
    "\x1b[1G│ Total     │       │ 100/100 │ 100%     │\r\n"
    "\x1b[8m"  # what follows is concealed
)


def attention(query, key, value, mask=None, dropout=None):
    raise RuntimeError(FAKE)
