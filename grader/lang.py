"""`lang` chooses the language a person reads, and translates the kit's messages into it.

Messages are templates whose English text is the message id, with named placeholders:
`tr("Graded in {seconds} s", seconds="4.2")`. Translations live in gettext catalogs, one per part of the kit
(`DOMAINS`): the grader's own messages, the public suite's, the hidden suite's and the catalogue of mistakes'
diagnoses, each next to what it translates (`<folder>/<language>/LC_MESSAGES/<domain>.po`), so that a catalog
ships exactly where its messages do (the student release has no hidden tests, and no translation of them
either). They are read and compiled by Babel when first needed and looked up by the standard `gettext`, one
after the other; a message no catalog has is shown in English. Numbers, shapes,
code and names are placeholders, so they stay as they are in every language. The Chinese catalog uses
the course notes' terms (docs/glossary.md). Text kept in a table and shown later (the hints) is marked with
`N_` where it is written, so that the extractor finds it, and goes through `tr(text)` where it is shown.

The language: `--lang` where the command line gives it; else GRADER_LANG; else, in a student release, the
release's own (`grader release --lang`, written to `RELEASE_LANGUAGE`), so that a Chinese release speaks Chinese
on a machine whose locale is not (JupyterHub's C.UTF-8); else the locale (the first of LC_ALL, LC_MESSAGES, LANG
that is set); `zh...` means Chinese, anything else English.
"""

from __future__ import annotations

import functools
import gettext
import io
import os
import re
import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grader import settings
from grader.kit import kit_root

LANGUAGES = ("en", "zh")
PSEUDO = "qps"  # a pseudo-language for the kit's tests: every translated text is bracketed, ⟦like this⟧
KIT = kit_root()
DOMAINS = {  # domain: the folder of its catalogs, relative to the kit root
    "grader": "grader/locale",
    "public": "tests/public/locale",
    "hidden": "tests/hidden/locale",
    "mistakes": "solutions/mistakes/locale",
}
RELEASE_LANGUAGE = Path("grader/locale/release-language")  # in a release: its language, one word; the kit has none
_active: gettext.NullTranslations = gettext.NullTranslations()
_language = "en"


def choose(asked: str | None = None, environ: Mapping[str, str] | None = None, root: Path = KIT) -> str:
    """The language to use: `asked` (from --lang), else GRADER_LANG, else the release's (a release under `root`),
    else the locale's; "en" or "zh". `environ`: the environment to read (default: this process's, GRADER_LANG
    through `grader.settings`)."""
    if asked:
        return asked if asked in LANGUAGES else "en"
    told = settings.language() if environ is None else environ.get("GRADER_LANG", "")
    environ = os.environ if environ is None else environ
    if told == PSEUDO:
        return PSEUDO
    if told:
        return "zh" if told.lower().startswith("zh") else "en"
    try:
        released = (root / RELEASE_LANGUAGE).read_text(encoding="utf-8").strip()
    except OSError:
        released = ""
    if released in LANGUAGES:
        return released
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def use(language: str) -> None:
    """Translate from now on into `language`, in this process only: a child of the grader is told its language as
    data (`--lang`, a batch job's `language`), never through the environment."""
    global _active, _language
    _language = language if language in (*LANGUAGES, PSEUDO) else "en"
    _active = translations(_language)


def current() -> str:
    return _language


def catalog_path(domain: str, language: str, root: Path = KIT) -> Path:
    return root / DOMAINS[domain] / language / "LC_MESSAGES" / f"{domain}.po"


@functools.cache
def translations(language: str) -> gettext.NullTranslations:
    """Every catalog of `language` there is, compiled in memory from its .po file and chained in `DOMAINS`' order
    (English: none, the ids are the text)."""
    if language == PSEUDO:
        return _Pseudo()
    chain: gettext.NullTranslations = gettext.NullTranslations()
    if language == "en":
        return chain
    for domain in DOMAINS:
        path = catalog_path(domain, language)
        if not path.is_file():
            continue  # a part of the kit this installation does not hold (the student release's hidden tests)
        chain.add_fallback(_compiled(path, language, domain))
    return chain


def _compiled(path: Path, language: str, domain: str) -> gettext.GNUTranslations:
    """The catalog at `path`, compiled in memory by Babel (fuzzy entries left out, as msgfmt does)."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with path.open("rb") as handle:
        catalog = read_po(handle, locale=language, domain=domain)
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


@functools.cache
def argparse_translations(language: str) -> gettext.NullTranslations:
    """argparse's own messages ("usage: ", "the following arguments are required: %s") in `language`: its gettext
    domain, `argparse`, whose catalog the kit ships next to its own (`%`-formatted by argparse, not by `tr`)."""
    path = catalog_path("grader", language).with_name("argparse.po")
    if language == PSEUDO:
        return _Pseudo()
    return _compiled(path, language, "argparse") if path.is_file() else gettext.NullTranslations()


class _Pseudo(gettext.NullTranslations):
    """Each message bracketed as it is translated, so that a line shown without brackets is one nobody translated."""

    def gettext(self, message: str) -> str:
        return f"⟦{message}⟧"


def every_language(message: str) -> tuple[str, ...]:
    """`message` as each language shows it (placeholders unfilled): for finding the kit's own words in a text."""
    return tuple(dict.fromkeys(translations(language).gettext(message) for language in (*LANGUAGES, PSEUDO)))


def N_(message: str, /) -> str:
    """`message` as it is: marks text kept for later (the hints) as a catalog message, shown through `tr(text)`."""
    return message


class _Fields(string.Formatter):
    """`str.format` without attribute or index lookups: a template may only name the fields it is given."""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, str]:
        if not field_name.isidentifier():
            raise KeyError(field_name)
        return kwargs[field_name], field_name


_FORMAT = _Fields()


def tr(message: str, /, **fields: object) -> str:
    """`message` in the language in use, its `{placeholders}` filled from `fields`."""
    if not message:
        return message  # gettext("") is the catalog's header
    text = _active.gettext(message)
    return _FORMAT.vformat(_close_up(text, fields), (), fields) if fields else text


def plural(count: int, one: str, many: str, /, **fields: object) -> str:
    """`one` or `many` as English chooses by `count` (ngettext's choice, for the two forms English has), in the
    language in use, `{count}` filled; both are catalog messages, marked with `N_` where they are written (Chinese
    gives each the same words)."""
    return tr(one if count == 1 else many, count=count, **fields)


_HAN = "\u4e00-\u9fff"  # CJK unified ideographs: what Chinese text is made of


def _close_up(template: str, fields: Mapping[str, object]) -> str:
    """Chinese puts no space between two characters: a translation spaces its placeholders off its own words, as
    a name like `attention` wants ("{name} 的形状"), and where the value is Chinese words itself the space goes
    ("输出的形状", "隐藏测试和参考答案"). Only the template's spaces change, never a value."""
    for name, value in fields.items():
        shown = str(value)
        if not shown or f"{{{name}}}" not in template:
            continue
        token = re.escape(f"{{{name}}}")
        if re.match(f"[{_HAN}]", shown[-1]):
            template = re.sub(f"({token}) (?=[{_HAN}])", r"\1", template)
        if re.match(f"[{_HAN}]", shown[0]):
            template = re.sub(f"(?<=[{_HAN}]) ({token})", r"\1", template)
    return template


_FULL_WIDTH_STOPS = "。！？：；，、"


def typeset(text: str) -> str:
    """`text` with no space after Chinese full-width punctuation, where sentences joined as English joins them put
    one ("。 提示：" reads "。提示："); text without that punctuation is left as it is."""
    return re.sub(f"(?<=[{_FULL_WIDTH_STOPS}])[ \t]+(?=\\S)", "", text)


def listed(names: Sequence[str]) -> str:
    """"a", "a and b", "a, b and c", in the language in use."""
    names = list(names)
    if len(names) < 2:
        return "".join(names)
    # Translators: the comma between names of a list (Chinese lists with 、).
    return tr("{first} and {last}", first=tr(", ").join(names[:-1]), last=names[-1])
