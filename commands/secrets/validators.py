"""Predicates on a detected value: whether it holds a secret or only names one.

Shared by the project's rules (``secrets.rules``), the keyword glue around the library
(``secrets.plugins``) and the whole-field checks (``secrets.fields``).
"""

from __future__ import annotations

import base64
import re
from typing import Final

from detect_secrets.filters.heuristic import (
    is_prefixed_with_dollar_sign,
    is_sequential_string,
    is_templated_secret,
)

__all__ = [
    "OPEN_QUOTE",
    "P_PIN",
    "RANDOM_CHARS",
    "base64_of_text",
    "camel_word",
    "char_classes",
    "in_url",
    "letters_and_digits",
    "made_of_words",
    "names_no_secret",
    "openai_case_ok",
    "passphrase_words",
    "password_like",
    "random_looking",
    "short_password_value",
    "starts_key_part",
    "two_classes",
    "upper_and_lower",
    "value_is_reference",
]

OPEN_QUOTE: Final = "\"'`\u2018\u201c\u00ab\u300c\u300e"
"""Characters that open a quoted value."""


def value_is_reference(value: str) -> bool:
    """``<token>``, ``{key}``, ``${VAR}``, ``$VAR``, ``****``: names a secret, holds none."""
    return (
        is_templated_secret(value)
        or is_prefixed_with_dollar_sign(value)
        or not any(c.isalnum() for c in value)
    )


_PASSWORD_SYMBOLS: Final = frozenset("0123456789@#$%^&*_+=~/\\|<>")


def password_like(token: str) -> bool:
    """A one-token value holding a digit or a symbol (prose punctuation does not count)."""
    return any(c in _PASSWORD_SYMBOLS for c in token)


def letters_and_digits(value: str) -> bool:
    """Whether ``value`` holds a letter and a digit."""
    return any(c.isalpha() for c in value) and any(c.isdigit() for c in value)


_NOT_SECRET_WORDS: Final = frozenset(
    "str string int integer bytes bool boolean none null nil undefined optional any unknown "
    "true false secretstr secretbytes text varchar char".split()
)
_DOTTED_REFERENCE: Final = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:[,;]|[\[(].*)?")


def names_no_secret(token: str) -> bool:
    """An unquoted value that is a type (``str``, ``Optional[str]``), a null/boolean, or a
    dotted reference (``settings.API_KEY``, ``os.environ[...]``, ``cfg.get(...)``): code
    about a secret, not the secret."""
    head = re.split(r"[^A-Za-z0-9_]", token, maxsplit=1)[0].lower()
    return head in _NOT_SECRET_WORDS or _DOTTED_REFERENCE.fullmatch(token) is not None


def camel_word(value: str) -> bool:
    """A word of 8+ letters with capitals inside ("CorrectHorseBatteryStaple"): a password
    made of words; "Secret", "SECRET" and "secret" are not."""
    if len(value) < 8 or not value.isalpha() or not value.isascii():
        return False
    uppers = sum(c.isupper() for c in value)
    return uppers >= 2 and uppers < len(value) and re.search(r"[a-z][A-Z]", value) is not None


_P_MEASURE: Final = re.compile(r"\d+(?:[.,]\d+)*[A-Za-z]{0,3}|[A-Za-z]{1,3}-?\d+")
P_PIN: Final = re.compile(r"\d{4,12}")
"""A PIN: 4-12 digits."""
RANDOM_CHARS: Final = re.compile(r"[A-Za-z0-9_\-+/=.~]+")
"""The characters of a generated token."""
_STRONG_SYMBOLS: Final = frozenset("@#$%^&*+=~/\\|<>")


def short_password_value(keyword: str, value: str) -> bool:
    """Whether ``value`` after ``pass`` or ``pin`` is a password rather than English."""
    if keyword == "pin":
        return P_PIN.fullmatch(value) is not None
    if random_looking(value) or camel_word(value):
        return True
    if value.isdigit():
        return len(value) >= 6
    if any(c in _STRONG_SYMBOLS for c in value):
        return len(value) >= 4
    return len(value) >= 6 and letters_and_digits(value) and not _P_MEASURE.fullmatch(value)


def random_looking(value: str) -> bool:
    """A token (16+ characters mixing letters and digits) or a password (8+ characters with
    a symbol and two of lower case, upper case and digits); not a path or a URL."""
    if value[:1] in "/~." or "://" in value:
        return False
    if len(value) >= 16 and RANDOM_CHARS.fullmatch(value) and letters_and_digits(value):
        return not is_sequential_string(value)
    if len(value) >= 8 and any(c in _STRONG_SYMBOLS for c in value):
        classes = (
            any(c.islower() for c in value)
            + any(c.isupper() for c in value)
            + any(c.isdigit() for c in value)
        )
        return classes >= 2
    return False


_P_WORD_PIECE: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_P_LETTER_DIGIT: Final = re.compile(r"(?<=[A-Za-z])[0-9]|(?<=[0-9])[A-Za-z]")
_VOWELS: Final = frozenset("aeiouyAEIOUY")


def made_of_words(token: str) -> bool:
    """Whether a letters-and-digits token reads as words and numbers (``build-2024-03-01``,
    ``ProjectPhoenixRelease2025Q3``, ``snake_case_v2``) rather than random characters.

    The token is cut into pieces at separators, case changes and digits. Random characters
    give many odd letter pieces (1-2 letters, or no vowel); an identifier gives few. A token
    with at least three odd pieces, making 40% of its letter pieces, or with five or more
    letter-digit junctions (``k3j5h2g8``), is random. Measured on random tokens: a 40-char
    base64 key reads as words about once in 20,000, a 20-char base62 token about once in
    100, a 20-char single-case token (``k3j5...`` in lower case and digits) once in ten.
    """
    letters = [piece for piece in _P_WORD_PIECE.findall(token) if piece[0].isalpha()]
    odd = sum(1 for piece in letters if len(piece) <= 2 or _VOWELS.isdisjoint(piece))
    if odd >= 3 and odd * 5 >= len(letters) * 2:
        return False
    return len(_P_LETTER_DIGIT.findall(token)) < 5


def base64_of_text(token: str) -> bool:
    """Whether a 40-character base64 token decodes to printable UTF-8 text (the last
    character may be cut short: the text went on)."""
    try:
        raw = base64.b64decode(token, validate=True)
    except ValueError:
        return False
    for cut in range(4):
        try:
            decoded = raw[: len(raw) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return decoded.replace("\n", " ").replace("\t", " ").replace("\r", " ").isprintable()
    return False


def in_url(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` sits in a whitespace-delimited word holding ``://``."""
    left = max(text.rfind(" ", 0, start), text.rfind("\n", 0, start))
    right = len(text)
    for stop in (" ", "\n"):
        at = text.find(stop, end)
        if 0 <= at < right:
            right = at
    word = text[left + 1 : right]
    return "://" in word or word.lower().startswith("www.")


def upper_and_lower(body: str) -> bool:
    """Whether ``body`` holds upper and lower case letters."""
    return any(c.islower() for c in body) and any(c.isupper() for c in body)


def char_classes(value: str) -> int:
    """How many of lower case, upper case and digits ``value`` holds (0-3)."""
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
    )


def two_classes(body: str) -> bool:
    """Whether ``body`` mixes two of lower case, upper case and digits."""
    return char_classes(body) >= 2


_P_OPENAI_TYPED: Final = re.compile(r"sk-(?:proj|svcacct|admin)-", re.IGNORECASE)


def openai_case_ok(token: str) -> bool:
    """An OpenAI-style ``sk-`` token not in lower case must name a key type (``proj-``, ...)
    or carry a 40-character body, as legacy keys do ("SK-" alone is also a product-code
    prefix)."""
    return token.startswith("sk-") or _P_OPENAI_TYPED.match(token) is not None or len(token) >= 43


def starts_key_part(text: str, start: int) -> bool:
    """Whether ``text[start]`` begins a part of a key name (``auth_token``, ``apiToken``);
    CJK keywords have no word boundary to check."""
    if start == 0 or ord(text[start]) >= 0x2E80:
        return True
    before = text[start - 1]
    return not before.isalnum() or (before.islower() and text[start].isupper())


_PROSE_WORDS: Final = frozenset(
    # English function words, numbers and filler: a sentence, not a diceware phrase
    "a about above after again against all already also always am an and any are as ask at "
    "be because been before being below between both but by can could did do does down "
    "during each eight either else even ever every few first five for four from further "
    "had has have he her here hers him his how i if in into is it its just last least me "
    "mine more most my neither never next nine no nor not now of off on once one only or "
    "other our ours out over own please same see seven she should six so some such than "
    "thank thanks that the their theirs them then there these they this those three "
    "through to too two under until up us use used using very via was we were what when "
    "where which while who whom why will with would yet you your yours "
    # words that describe a password or its handling, not a password
    "attached blank case change changed changes changing char chars character characters "
    "complex complicated default different digit digits easy email empty encrypted "
    "expire expired expires file forgot forgotten hard hashed hidden incorrect insecure "
    "invalid length letter letters link long manager maximum message minimum new note "
    "number numbers old optional password passwords passphrase pin required requires reset "
    "secure sensitive sent set shared short simple stored strong symbol symbols temporary "
    "unknown update updated vault weak written wrong".split()
)
_P_PHRASE_WORD: Final = re.compile(r"[^\s_-]+")


def passphrase_words(value: str) -> bool:
    """Whether ``value`` (the rest of a clause after a password label) is a passphrase of
    words: 3 to 10 words of letters only (2 to 24 each; separated by spaces, ``-`` or
    ``_``), none of them an English function word or a word describing passwords
    (:data:`_PROSE_WORDS`: "the password is twelve characters long", "Password: see the
    vault" are sentences). "correct horse battery staple" (xkcd 936, the diceware style
    passphrase NIST SP 800-63B encourages) passes."""
    words = _P_PHRASE_WORD.findall(value)
    if not 3 <= len(words) <= 10:
        return False
    return all(
        2 <= len(word) <= 24 and word.isalpha() and word.lower() not in _PROSE_WORDS
        for word in words
    )
