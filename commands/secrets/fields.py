"""Whole structured fields: :func:`field_secret`.

Whole structured fields (an item's value, subject, predicate, a tag, a label): a field can
hold a secret with no keyword around it, or under a label that names a credential.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Final

from detect_secrets.filters.heuristic import is_potential_uuid, is_sequential_string

from memory_ledger.commands.secrets.detect import (
    P_ZERO_WIDTH,
    contains_secret,
    register_scan_cache,
)
from memory_ledger.commands.secrets.validators import (
    P_PIN,
    RANDOM_CHARS,
    char_classes,
    letters_and_digits,
    made_of_words,
    names_no_secret,
    short_password_value,
    value_is_reference,
)

__all__ = ["bare_token_secret", "field_secret"]

_FIELD_SYMBOLS: Final = frozenset("!@#$%^&*+=~|<>?")
_P_EMAIL: Final = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")
_P_HANDLE: Final = re.compile(r"[@#]\w+")
_P_HEX: Final = re.compile(r"[0-9a-fA-F]+")
_FIELD_QUOTES: Final = "\"'`\u2018\u2019\u201c\u201d"
_P_SPACE: Final = re.compile(r"\s")
"""A whitespace character: ``\\s`` of a ``str`` pattern is exactly ``str.isspace`` (both
are ``Py_UNICODE_ISSPACE``), one C search instead of a Python loop over the characters."""

_P_CREDENTIAL_LABEL: Final = re.compile(
    r"(?:^| )(?:"
    r"(pin(?: code| number)?)"
    r"|(password|passwd|pwd|passphrase|passcode|passwort|kennwort|contraseña|contrasena"
    r"|mot de passe|senha|wachtwoord|lösenord|losenord|passord|adgangskode|hasło|haslo"
    r"|пароль|şifre|sifre|パスワード|密码|密碼|비밀번호)"
    r"|(?:(?:api|access|secret|private|auth|ssh|signing|encryption|license|licence|master"
    r"|client|app|account|aws) )?(?:key|token)|(?:client )?secret|credentials?|pass"
    r")s?(?: (?:for|of|to|on|at|in) .*)?$"
)
"""A label naming a credential: the credential word is the label's last word ("db
password", "api key", "wifi pass", ``dbPassword``, ``API_KEY``) or comes before "for", "of",
"to", "on", "at" or "in" ("password for the NAS"); "password hint", "token count" and
"secret ingredient" name something else. ``key`` alone must be qualified ("api key",
"access key", "ssh key"): "house key" and "key" are not credentials. Group 1 is a PIN label,
group 2 a password label (other languages included); the rest name tokens and keys."""

_NOT_A_VALUE: Final = frozenset(
    "forgotten forgot changed expired reset redacted hidden same empty blank default secret "
    "password passwords required set unset tbd n/a na none unknown private confidential "
    "masked omitted removed missing".split()
)


def _field_token(text: str) -> str:
    """``text`` as one comparable token: NFKC, no zero-width characters, no edge quotes."""
    token = unicodedata.normalize("NFKC", P_ZERO_WIDTH.sub("", text)).strip()
    return token.strip(_FIELD_QUOTES).strip()


def _address_like(token: str) -> bool:
    """A URL, a path, an email address or a handle/hashtag: not a generated secret."""
    return (
        "://" in token
        or token.startswith(("/", "\\", "~/", "./", "../"))
        or re.match(r"[A-Za-z]:\\", token) is not None
        or token.lower().startswith("www.")
        or _P_EMAIL.fullmatch(token) is not None
        or _P_HANDLE.fullmatch(token) is not None
    )


def _generated_password(token: str) -> bool:
    """12+ characters with lower case, upper case, a digit and a symbol (``Zq8!vR2#mK9pL4xW``)."""
    return (
        len(token) >= 12
        and not _FIELD_SYMBOLS.isdisjoint(token)  # the cheap test first (same answer)
        and char_classes(token) == 3
        and not _address_like(token)
    )


def _random_token(token: str) -> bool:
    """20+ token characters mixing letters and digits that are not a uuid, a hex digest, a
    path, a URL or words and numbers (:func:`made_of_words`)."""
    return (
        len(token) >= 20
        and RANDOM_CHARS.fullmatch(token) is not None
        and letters_and_digits(token)
        and _P_HEX.fullmatch(token.replace("-", "")) is None
        and not is_potential_uuid(token)
        and not _address_like(token)
        and not is_sequential_string(token)
        and not made_of_words(token)
    )


def _has_space(text: str) -> bool:
    """Whether ``text`` holds a whitespace character (``str.isspace``)."""
    return _P_SPACE.search(text) is not None


@lru_cache(maxsize=4096)
def _credential_label(label: str) -> str | None:
    """What ``label`` names: ``pin``, ``password``, ``credential`` (a token or a key), or
    None (no credential: :data:`_P_CREDENTIAL_LABEL`). Cached: a store's items share a
    few predicates, and the answer is a function of the label alone."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", unicodedata.normalize("NFKC", label))
    words = " ".join(re.sub(r"[_\-.:/]+", " ", words).lower().split())
    match = _P_CREDENTIAL_LABEL.search(words)
    if match is None:
        return None
    return "pin" if match.group(1) else "password" if match.group(2) else "credential"


register_scan_cache(_credential_label.cache_clear)


def _credential_value(label: str, token: str) -> bool:
    """Whether one-token ``token`` is a plausible value of a field labelled ``label``."""
    kind = _credential_label(label)
    if kind is None or not token or _has_space(token):
        return False
    if value_is_reference(token) or names_no_secret(token) or _address_like(token):
        return False
    if token.lower() in _NOT_A_VALUE or any(c in "()[]{}" for c in token):
        return False
    if kind == "pin":
        return P_PIN.fullmatch(token) is not None or short_password_value("pass", token)
    if kind == "password":  # any one token of 4+ characters, as after "password ="
        return len(token) >= 4
    return short_password_value("pass", token)


def field_secret(text: str, *, label: str | None = None) -> bool:
    """Whether a whole structured field value holds a secret.

    ``text`` is one field (an item's value, subject or predicate, a tag, a label); ``label``
    is optional, what the field is (an item's predicate: "db password", "api key", "pin").
    True when:

    * :func:`contains_secret` finds a secret in ``text``; or
    * the stripped field (NFKC, zero-width characters and edge quotes removed) is one
      token that is a secret on its own: 12+ characters with lower case, upper case, a digit
      and one of ``!@#$%^&*+=~|<>?`` (``Zq8!vR2#mK9pL4xW``); or 20+ characters of
      ``[A-Za-z0-9_-+/=.~]`` mixing letters and digits that are random, not words and
      numbers (``build-2024-03-01-rc1``), a uuid, a hex digest, a path or a URL; or
    * ``label`` names a credential (:data:`_P_CREDENTIAL_LABEL`: the credential word is the
      label's last word, "db password", "API_KEY", "wifi pass", "pin", "access key",
      "credentials", "Passwort", ...; or it comes before "for"/"of": "password for the NAS")
      and the field is one plausible credential token: after a password label any token of
      4+ characters (as the keyword rules accept after ``password =``), after a PIN label
      4-12 digits or a password-like value, after a token or key label a password-like
      value (:func:`short_password_value`: a symbol, letters with digits, 6+ digits, a
      random token or a camel-case word of 8+ letters).

    Silent on ordinary values ("Lisbon", "2025-03-01", "blue", "iPhone 15 Pro", "ACME-42",
    "v1.2.3", "https://example.com/a", ``snake_case_name``, ``CamelCaseName``, uuids,
    emails, handles) with no label or a label that names no credential ("hunter" labelled
    "favorite sport"); and, under a credential label, on values that name no secret:
    references (``${DB_PASSWORD}``, ``<token>``, ``****``), types and nulls, URLs, paths,
    emails, several words ("reset last week") and words such as "forgotten", "changed",
    "unknown", "redacted". Never raises for a ``str``.
    """
    if contains_secret(text):
        return True
    token = _field_token(text)
    if not token:
        return False
    if _bare_secret(token):
        return True
    return label is not None and _credential_value(label, token)


def bare_token_secret(text: str) -> bool:
    """Whether ``text`` as a whole (stripped as :func:`field_secret` strips it) is one token
    that is a secret on its own: a generated password (``Zq8!vR2#mK9pL4xW``) or a random
    token of 20+ characters (:func:`field_secret`'s second rule, without its scan). What a
    memory's whole statement is judged by too: a statement that is nothing but a password
    is one (an item's value, subject and tags are judged by :func:`field_secret`)."""
    token = _field_token(text)
    return bool(token) and _bare_secret(token)


def _bare_secret(token: str) -> bool:
    return not _has_space(token) and (_generated_password(token) or _random_token(token))
