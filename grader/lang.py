"""`lang` chooses the language a person reads, and translates the kit's messages into it.

Messages are templates whose English text is the message id, with named placeholders:
`tr("Graded in {seconds} s", seconds="4.2")`. Translations live in gettext catalogs,
`grader/locale/<language>/LC_MESSAGES/grader.po`, read and compiled by Babel when first needed and
looked up by the standard `gettext`; a message the catalog lacks is shown in English. Numbers, shapes,
code and names are placeholders, so they stay as they are in every language. The Chinese catalog uses
the course notes' terms (docs/glossary.md). Text kept in a table and shown later (the hints) is marked with
`N_` where it is written, so that the extractor finds it, and goes through `tr(text)` where it is shown.

The language: `--lang` where the command line gives it; else GRADER_LANG; else the locale (the first of
LC_ALL, LC_MESSAGES, LANG that is set); `zh...` means Chinese, anything else English.
"""

from __future__ import annotations

import functools
import gettext
import io
import os
from collections.abc import Mapping
from pathlib import Path

LANGUAGES = ("en", "zh")
DOMAIN = "grader"
CATALOGS = Path(__file__).resolve().parent / "locale"
_active: gettext.NullTranslations = gettext.NullTranslations()
_language = "en"


def choose(asked: str | None = None, environ: Mapping[str, str] = os.environ) -> str:
    """The language to use: `asked` (from --lang), else GRADER_LANG, else the locale's; "en" or "zh"."""
    if asked:
        return asked if asked in LANGUAGES else "en"
    for name in ("GRADER_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def use(language: str) -> None:
    """Translate from now on into `language`; GRADER_LANG carries it to the grader's own child processes."""
    global _active, _language
    _language = language if language in LANGUAGES else "en"
    _active = translations(_language)
    os.environ["GRADER_LANG"] = _language


def current() -> str:
    return _language


@functools.cache
def translations(language: str) -> gettext.NullTranslations:
    """The catalog of `language`, compiled in memory from its .po file (English: none, the ids are the text)."""
    path = CATALOGS / language / "LC_MESSAGES" / f"{DOMAIN}.po"
    if language == "en" or not path.is_file():
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with path.open("rb") as handle:
        catalog = read_po(handle, locale=language, domain=DOMAIN)
    compiled = io.BytesIO()
    write_mo(compiled, catalog)  # fuzzy entries are left out, as msgfmt does
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


def N_(message: str, /) -> str:
    """`message` as it is: marks text kept for later (the hints) as a catalog message, shown through `tr(text)`."""
    return message


def tr(message: str, /, **fields: object) -> str:
    """`message` in the language in use, its `{placeholders}` filled from `fields`."""
    text = _active.gettext(message)
    return text.format(**fields) if fields else text
