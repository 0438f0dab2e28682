"""`breaking` finds where a terminal line may break, as a reader of either language expects: at spaces, and between
two Chinese characters (which have none), never inside a word, an identifier or a test's name.

Rich breaks lines only at spaces, so that a Chinese sentence, one "word" to it, leaves a gap as long as itself at the
end of the line before, and a name longer than what is left is folded anywhere (`cross-attenti` / `on`). `Paragraph`
is rich's `Text` with its own breaks; rich still measures every character's cells and draws the lines.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from rich.cells import cell_len
from rich.text import Lines, Text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, ConsoleRenderable, JustifyMethod, OverflowMethod, RenderResult

_CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")  # ideographs, CJK punctuation, full-width forms
# Chinese punctuation that never starts a line, and that never ends one (the brackets' opening halves).
_NEVER_FIRST = set("，。、；：？！）」』】》〉…—·%,.;:?!)]}")
_NEVER_LAST = set("（「『【《〈([{")


def _inside(index: int, kept: Sequence[tuple[int, int]]) -> bool:
    return any(start < index < end for start, end in kept)


def breaks(text: str, width: int, *, keep: Iterable[str] = (), fold: bool = True) -> list[int]:
    """The offsets of `text` to break it at so that each line fits in `width` cells (rich's `divide_line`): after
    spaces, or between two characters one of which is Chinese; never inside a word, nor inside a `keep` (a test's
    name, with spaces in its parameters) that fits on a line of its own. Only a word longer than a whole line is
    folded, as rich folds it."""
    names = [(found.start(), found.end(), cell_len(name) <= width) for name in dict.fromkeys(keep) if name
             for found in re.finditer(re.escape(name), text)]
    kept = [(start, end) for start, end, fits in names if fits]
    too_long = [(start, end) for start, end, fits in names if not fits]  # broken before its parameters, "[", too

    def may_break(index: int) -> bool:
        before, after = text[index - 1], text[index]
        if after.isspace() or _inside(index, kept):
            return False
        if before.isspace() or (after == "[" and _inside(index, too_long)):
            return True
        if not (_CJK.match(before) or _CJK.match(after)):
            return False
        return after not in _NEVER_FIRST and before not in _NEVER_LAST

    offsets: list[int] = []
    start, column = 0, 0
    for index, character in enumerate(text):
        cells = cell_len(character)
        if column + cells > width and not character.isspace() and index > start:
            at = next((i for i in range(index, start, -1) if may_break(i)), index if fold else None)
            if at is not None:
                offsets.append(at)
                start, column = at, cell_len(text[at:index])
        column += cells
    return offsets


class Paragraph(Text):
    """Rich's `Text`, wrapped at the breaks a reader expects (`breaks`): Chinese between characters, `keep` whole."""

    def __init__(self, text: Text, *, keep: Iterable[str] = ()) -> None:
        super().__init__(text.plain, style=text.style, justify=text.justify, overflow=text.overflow,
                         no_wrap=text.no_wrap, end=text.end, spans=list(text.spans))
        self.keep = tuple(keep)

    def wrap(self, console: Console, width: int, *, justify: JustifyMethod | None = None,
             overflow: OverflowMethod | None = None, tab_size: int = 8, no_wrap: bool | None = None) -> Lines:
        """As `Text.wrap`, with `breaks` in place of rich's spaces-only `divide_line`."""
        if no_wrap or self.no_wrap or overflow == "ignore":
            return super().wrap(console, width, justify=justify, overflow=overflow, tab_size=tab_size, no_wrap=no_wrap)
        lines = Lines()
        for line in self.split(allow_blank=True):
            if "\t" in line:
                line.expand_tabs(tab_size)
            pieces = line.divide(breaks(line.plain, width, keep=self.keep))
            for piece in pieces:
                piece.rstrip_end(width)
                piece.truncate(width, overflow=overflow or self.overflow or "fold")
            lines.extend(pieces)
        return lines


BULLETS = (" • ", " ・", " - ")  # each three cells wide: ・ is a full-width character


def bullet_for(encoding: str) -> str:
    """The first of `BULLETS` a console writing `encoding` can show."""
    for bullet in BULLETS:
        try:
            bullet.encode(encoding)
        except (UnicodeEncodeError, LookupError):
            continue
        return bullet
    return BULLETS[-1]


def markdown(text: str, **options: Any) -> ConsoleRenderable:
    """Rich's `Markdown` of `text`, its paragraphs wrapped as `Paragraph`s, each inline code span kept whole."""
    return _markdown_class()(text, **options)


@functools.cache
def _markdown_class() -> type:
    from rich import markdown  # here: it costs 50 ms, and only `grader hint` renders Markdown

    class Prose(markdown.Paragraph):
        def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
            self.text.justify = self.justify
            code = [self.text.plain[span.start:span.end] for span in self.text.spans if span.style == "markdown.code"]
            yield Paragraph(self.text, keep=code)

    class Item(markdown.ListItem):
        def render_bullet(self, console: Console, options: ConsoleOptions) -> RenderResult:
            # rich's " • " prints as " ? " on a GB2312 console (Chinese Windows'): the first bullet it can write.
            lines = super().render_bullet(console, options)
            bullet = bullet_for(console.encoding)
            for segment in lines:
                yield segment._replace(text=bullet) if segment.text == " • " else segment

    class Markdown(markdown.Markdown):
        elements: ClassVar[dict[str, type[markdown.MarkdownElement]]] = {
            **markdown.Markdown.elements, "paragraph_open": Prose, "list_item_open": Item}

    return Markdown
