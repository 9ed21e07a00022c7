"""Secret detection and redaction (docs/design.md).

Secret shapes (API keys, tokens, password assignments, private keys, cloud keys) are
redacted in transcripts and rejected in candidate items before any event is written.

Detection is Yelp's ``detect-secrets`` library: its regex plugins (AWS, GitHub, GitLab,
Slack, Stripe, OpenAI, JWT, private keys, Azure, npm, PyPI, SendGrid, Twilio, ...), its
keyword-assignment patterns and heuristic filters, and its base64 high-entropy plugin. The
plugins are called directly on the text (``plugin.denylist`` patterns and
``plugin.analyze_string``), not through ``scan_line``, which reads global settings, may
verify secrets over the network and, in its "eager" mode, flags unquoted English.

Adjustments for conversational text (each is named ``_P_*`` below or documented inline):

* Token spans are widened to the whole token: the library reports the shortest match (a
  JWT without its signature, a Stripe key's first 24 characters, just ``ghp`` of a GitHub
  token), which would leave the rest of the secret in the text.
* Keyword assignments (``password = hunter2``) must name a credential as a whole word part
  of the key (``db_password``, ``apiKey``, ``aws_secret_access_key``; not ``secretary``),
  and an unquoted value after a plain English word and a colon ("my secret: be kind") must
  be one token of 4+ characters that contains a digit or a symbol. Unquoted values that are
  code about a secret are skipped: comparisons (``password == other``), types and nulls
  (``api_key: str | None``), dotted references (``settings.API_KEY``, ``os.environ[...]``),
  and paths after ``PWD=``; the library's filters skip ``${VAR}``, ``<token>``, ``{key}``
  and ``f(x)``.
* Shapes the library misses: whole PEM / PuTTY private-key blocks (the library flags only
  the ``BEGIN`` line), ``sk-proj-``/``sk-svcacct-``/legacy OpenAI-style keys without the
  ``T3BlbkFJ`` marker, Anthropic ``sk-ant-`` keys, GitHub fine-grained ``github_pat_``
  tokens, Stripe test keys and webhook secrets, Google ``AIza`` API keys, unquoted AWS
  secret access keys, ``Authorization:`` headers and ``Bearer`` tokens, and "my password
  is X" / "API key: X" phrasing.
* Token prefixes in any case (``SK-PROJ-``, ``Sk-Proj-``, ``GHP_``, ``GLPAT-``,
  ``SK_LIVE_``, ...): an upper-cased copy of a key is still the key.
* ``token`` / ``secret`` / ``credential`` / ``passphrase`` / ``passwd`` / ``pwd``
  assignments (``token: <value>``, ``auth_token = <value>``, "session token is <value>")
  whose value looks random, and password assignments in other languages (``passwort =``,
  ``contraseña:``, ``mot de passe =``, ``senha =``, ``パスワード：``, ...).
* Shapes with no keyword: the engine's own MCP bearer tokens (``mlt_`` + 43 URL-safe
  base64 characters, :func:`memory_ledger.replay.mcp.tokens.new_token`), npm tokens
  (``npm_`` + 36 alphanumerics; the library's npm plugin fires only inside ``.npmrc``) and
  Hugging Face tokens (``hf_`` + 34+ alphanumerics; no library plugin), each required to mix
  character classes so a snake_case identifier is not a token; and a 40-character AWS
  secret access key with no assignment: anywhere when it mixes upper case, lower case and
  digits, is not made of words (``handleUserAuthenticationRequestV2Handler``), not base64
  of printable text and not inside a URL; with ``aws``/``amazon`` or an ``AKIA``/``ASIA``
  key id within 120 characters, also without a digit. Lower-case hex (git SHA-1), uuids and
  all-caps base32 stay silent. There is no general high-entropy detector for free text: it
  would refuse ordinary text.
* Prose logins: a login verb ("logs into", "signs in to", "ssh to", "connects to",
  "authenticates"), then within 40 characters "as <user> with|using [password] <value>"
  with a password-looking value ("logs into the NAS as admin with Zq8!vR2#mK9pL4xW");
  "logs into the NAS as admin with her laptop" stays silent.
* Short password keywords in prose: ``pass``/``pin`` followed by "is", ``:`` or ``=`` and
  one token ("wifi pass is CorrectHorseBatteryStaple", "my PIN is 4821"). A ``pass`` value
  must look like a password (a symbol, letters with digits but not a measure such as
  ``2500m``, 6+ digits, or a camel-case word of 8+ letters); a ``pin`` value is 4-12 digits.
  A camel-case word of 8+ letters also counts as a password value after the other password
  keywords ("my password is CorrectHorseBatteryStaple"). One lower-case or capitalized word
  stays silent after every keyword: "the pass is open", "my password is secret" and "my
  password is Password" are read as English, as a person would ("secret" describes the
  password more often than it is one).
* Zero-width characters (U+200B, U+200C, U+200D, U+2060, U+FEFF) are removed from a copy
  of the text before the scan, so a key split by them is still found; its span covers the
  whole original stretch, the invisible characters inside included.
* Compatibility forms: text that is not NFKC-normalized (``ｓｋ-proj-...`` in full-width
  letters) is scanned in NFKC form, and the spans are mapped back to the original text.
* Not used: the hex high-entropy plugin (quoted commit hashes and digests are common in
  agent transcripts and are not secrets) and the public-IP plugin (an address is not a
  credential).

Whole structured fields (:func:`field_secret`, for an item's value, subject, predicate, a
tag or a label): a field is a secret when the text scan finds one in it, when the whole
field is one generated-looking token (12+ characters with lower case, upper case, a digit
and a symbol; or 20+ random token characters mixing letters and digits, not a uuid, a hex
digest, a path, a URL or words and numbers), or when its label names a credential ("db
password", "api key", "pin", ...) and the field is one plausible credential token.

Redaction markers ``[REDACTED:<kind>]`` are opaque to detection, so redaction is idempotent.
Speed: about 0.1 ms for a 2,000-character conversational transcript, about 0.5 ms for
code-heavy text (literal gates skip the patterns whose anchors are absent, and keyword
patterns are tried only where ``str.find`` locates their keyword).
"""

from __future__ import annotations

import base64
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Final

import msgspec
from detect_secrets.filters.heuristic import (
    is_indirect_reference,
    is_potential_uuid,
    is_prefixed_with_dollar_sign,
    is_sequential_string,
    is_templated_secret,
)
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import (
    CONFIG_DENYLIST_REGEX_TO_GROUP,
    DENYLIST,
    QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
)
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

__all__ = [
    "ZERO_WIDTH",
    "Redaction",
    "SecretSpan",
    "clear_scan_cache",
    "contains_secret",
    "field_secret",
    "find_secrets",
    "redact",
]


class SecretSpan(msgspec.Struct, frozen=True):
    """A secret-shaped span ``text[start:end]`` of the scanned text, named by ``kind``.

    ``kind`` is a snake_case name such as ``aws_access_key``, ``github_token``,
    ``openai_token``, ``slack_token``, ``json_web_token``, ``private_key``,
    ``bearer_token``, ``password`` or ``secret_keyword``.
    """

    start: int
    end: int
    kind: str


class Redaction(msgspec.Struct, frozen=True):
    """The outcome of :func:`redact`.

    ``text`` has each secret span replaced by ``[REDACTED:<kind>]``; ``count`` is the
    number of spans replaced; ``kinds`` the distinct kinds replaced, sorted.
    """

    text: str
    count: int
    kinds: tuple[str, ...]


# ---------------------------------------------------------------------------------------
# The scanned text, with cheap facts computed once. They gate the regexes (a pattern runs
# only when the literal it needs is present), which keeps a scan well under a millisecond
# for a typical 2,000-character transcript; a gate never changes what a pattern finds.

_LONG_RUN: Final = re.compile(r"[A-Za-z0-9_\-+/=]{20}")


class _Scan:
    __slots__ = ("text", "lower", "_long_run")

    def __init__(self, text: str) -> None:
        self.text = text
        lower = text.lower()
        # Offsets of ``lower`` equal those of ``text`` unless a character lowercases to
        # several (rare); case-insensitive patterns then run on ``text`` instead.
        self.lower: str | None = lower if len(lower) == len(text) else None
        self._long_run: bool | None = None

    def has(self, *literals: str) -> bool:
        return any(literal in self.text for literal in literals)

    def has_ci(self, *literals: str) -> bool:
        folded = self.lower if self.lower is not None else self.text.lower()
        return any(literal in folded for literal in literals)

    @property
    def long_run(self) -> bool:
        """Whether a run of 20 token characters exists (every long token shape has one)."""
        if self._long_run is None:
            self._long_run = _LONG_RUN.search(self.text) is not None
        return self._long_run


class _CiPattern:
    """A case-insensitive pattern, run on the lowercased text (much faster in ``re``)."""

    __slots__ = ("plain", "folded")

    def __init__(self, pattern: str) -> None:
        self.plain = re.compile(pattern)
        self.folded = re.compile(pattern, re.IGNORECASE)

    def finditer(self, scan: _Scan) -> Iterator[re.Match[str]]:
        """Matches with offsets into ``scan.text`` (read groups from ``scan.text``)."""
        if scan.lower is not None:
            return self.plain.finditer(scan.lower)
        return self.folded.finditer(scan.text)


# ---------------------------------------------------------------------------------------
# Candidates: (start, end, kind, rank). A lower rank wins the kind of merged spans: specific
# token shapes (0) over keyword assignments and phrases (1) over entropy (2).

_Candidate = tuple[int, int, str, int]

_MARKER: Final = re.compile(r"\[REDACTED:[a-z0-9_]+\]")
_LEFT_TOKEN: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_RIGHT_TOKEN: Final = _LEFT_TOKEN | frozenset("./+=")
_EDGE_JUNK: Final = " \t\r\n\"'`=:"

_Gate = Callable[[_Scan], bool]


def _long(scan: _Scan) -> bool:
    return scan.long_run


# The library's regex plugins, each with a gate that is a necessary condition of all its
# patterns (a literal they contain, or the 20-character token run their values need).
_REGEX_PLUGINS: Final[tuple[tuple[RegexBasedDetector, _Gate], ...]] = (
    (ArtifactoryDetector(), lambda s: s.has("AKC", "AP")),
    (AWSKeyDetector(), _long),
    (AzureStorageKeyDetector(), lambda s: s.has("AccountKey=")),
    (BasicAuthDetector(), lambda s: s.has("://") and s.has("@")),
    (CloudantDetector(), lambda s: s.long_run and s.has_ci("cl")),
    (DiscordBotTokenDetector(), _long),
    (GitHubTokenDetector(), _long),
    (GitLabTokenDetector(), _long),
    (IbmCloudIamDetector(), lambda s: s.long_run and s.has_ci("key", "pwd", "pass", "token")),
    (IbmCosHmacDetector(), lambda s: s.long_run and s.has_ci("secret")),
    (JwtTokenDetector(), lambda s: s.has("eyJ")),
    (MailchimpDetector(), lambda s: s.long_run and s.has("-us")),
    (NpmDetector(), lambda s: s.has("_authToken")),
    (OpenAIDetector(), lambda s: s.has("sk-")),
    (PrivateKeyDetector(), lambda s: s.has("PRIVATE KEY", "PuTTY-User-Key-File")),
    (PypiTokenDetector(), lambda s: s.has("pypi-")),
    (SendGridDetector(), lambda s: s.has("SG.")),
    (SlackDetector(), lambda s: s.has_ci("xox", "hooks.slack.com")),
    (SoftlayerDetector(), lambda s: s.long_run and s.has_ci("sl", "softlayer")),
    (SquareOAuthDetector(), lambda s: s.has("sq0csp-")),
    (StripeDetector(), lambda s: s.has("k_live_")),
    (TelegramBotTokenDetector(), lambda s: s.long_run and s.has(":")),
    (TwilioKeyDetector(), _long),
)

# Base64 strings in quotes: English words cannot reach 4.5 bits (it needs >= 23 distinct
# characters in one quoted token), so the library's default limit is kept.
_ENTROPY: Final = Base64HighEntropyString(limit=4.5)


def _slug(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_")


def _overrides_analyze(plugin: RegexBasedDetector) -> bool:
    return type(plugin).analyze_string is not RegexBasedDetector.analyze_string


_PLUGIN_TABLE: Final = tuple(
    (
        plugin,
        gate,
        _slug(plugin.secret_type),
        tuple(plugin.denylist),
        _overrides_analyze(plugin),
    )
    for plugin, gate in _REGEX_PLUGINS
)


def _plugin_candidates(scan: _Scan) -> Iterator[_Candidate]:
    """Spans of the library's regex plugins (``findall`` semantics, with positions)."""
    text = scan.text
    for plugin, gate, kind, patterns, validates in _PLUGIN_TABLE:
        if not gate(scan):
            continue
        for pattern in patterns:
            for match in pattern.finditer(text):
                if pattern.groups:
                    spans = [match.span(i) for i in range(1, pattern.groups + 1) if match.group(i)]
                else:
                    spans = [match.span()]
                for start, end in spans:
                    if validates and not any(True for _ in plugin.analyze_string(text[start:end])):
                        continue
                    yield (*_widen(text, start, end), kind, 0)


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """Trim separators from the edges, then extend over the token's own characters."""
    while start < end and text[start] in _EDGE_JUNK:
        start += 1
    while end > start and text[end - 1] in _EDGE_JUNK:
        end -= 1
    while start > 0 and text[start - 1] in _LEFT_TOKEN:
        start -= 1
    while end < len(text) and text[end] in _RIGHT_TOKEN:
        end += 1
    while end > start and text[end - 1] == ".":  # a sentence's full stop
        end -= 1
    return start, end


# ---------------------------------------------------------------------------------------
# Keyword assignments: the library's patterns (``password = x``, ``api_key: "x"``, ...)
# applied to each line holding a keyword, with positions from the match groups.

_KEYWORD_PATTERNS: Final = tuple(
    {**CONFIG_DENYLIST_REGEX_TO_GROUP, **QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP}.items()
)
_KEYWORD_HINT: Final = _CiPattern("|".join(DENYLIST))
_KEYWORD_HINT_LINE: Final = re.compile("|".join(DENYLIST), re.IGNORECASE)
# A credential must be a whole part of the key name (parts split at _ - . and camelCase).
_KEYWORD_PART: Final = re.compile(r"(?:^|_)(?:" + "|".join(DENYLIST) + r")s?(?:_|$)")
_KEY_NAME_CHARS: Final = _LEFT_TOKEN | frozenset(".ñÑ")
_PASSWORD_HINT: Final = re.compile(r"pass|pwd|contrase", re.IGNORECASE)


def _key_name(line: str, start: int, end: int) -> tuple[bool, bool]:
    """Whether the key name around ``line[start:end]`` names a credential, and whether it is
    a plain English word (``secret``, ``Password``) rather than an identifier."""
    while start > 0 and line[start - 1] in _KEY_NAME_CHARS:
        start -= 1
    while end < len(line) and line[end] in _KEY_NAME_CHARS:
        end += 1
    name = line[start:end]
    parts = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    parts = parts.replace("-", "_").replace(".", "_")
    plain = name.isalpha() and (name.islower() or name.istitle())
    return _KEYWORD_PART.search(parts) is not None, plain


def _value_is_reference(value: str) -> bool:
    """``<token>``, ``{key}``, ``${VAR}``, ``$VAR``, ``****``: names a secret, holds none."""
    return (
        is_templated_secret(value)
        or is_prefixed_with_dollar_sign(value)
        or not any(c.isalnum() for c in value)
    )


_PASSWORD_SYMBOLS: Final = frozenset("0123456789@#$%^&*_+=~/\\|<>")


def _password_like(token: str) -> bool:
    """A one-token value holding a digit or a symbol (prose punctuation does not count)."""
    return any(c in _PASSWORD_SYMBOLS for c in token)


def _letters_and_digits(value: str) -> bool:
    return any(c.isalpha() for c in value) and any(c.isdigit() for c in value)


_NOT_SECRET_WORDS: Final = frozenset(
    "str string int integer bytes bool boolean none null nil undefined optional any unknown "
    "true false secretstr secretbytes text varchar char".split()
)
_DOTTED_REFERENCE: Final = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:[,;]|[\[(].*)?")


def _names_no_secret(token: str) -> bool:
    """An unquoted value that is a type (``str``, ``Optional[str]``), a null/boolean, or a
    dotted reference (``settings.API_KEY``, ``os.environ[...]``, ``cfg.get(...)``): code
    about a secret, not the secret."""
    head = re.split(r"[^A-Za-z0-9_]", token, maxsplit=1)[0].lower()
    return head in _NOT_SECRET_WORDS or _DOTTED_REFERENCE.fullmatch(token) is not None


def _keyword_line(line: str, offset: int) -> Iterator[_Candidate]:
    for pattern, group in _KEYWORD_PATTERNS:
        for match in pattern.finditer(line):
            start, end = match.span(group)
            if start >= end:
                continue
            key = _KEYWORD_HINT_LINE.search(line, match.start(), match.end())
            if key is None:
                continue
            named, plain = _key_name(line, key.start(), key.end())
            if not named:
                continue
            value = line[start:end]
            if _value_is_reference(value) or is_indirect_reference(match.group(0)):
                continue
            if key.group(0).lower() == "pwd" and value[:1] in "/~":
                continue  # PWD=/home/me is a working directory, not a password
            quoted = start > 0 and line[start - 1] in "'\"`"
            operator = line[key.end() : start]
            if not quoted and (
                "==" in operator or "!=" in operator or _names_no_secret(value.split()[0])
            ):
                continue  # a comparison, a type annotation, null, or a dotted reference
            if plain and not quoted and "=" not in operator:
                # "my secret: be kind" and "my secret: 2 eggs" are English; "password:
                # hunter2" is a credential.
                token = value.split()[0].rstrip(".,;!?")
                if len(token) < 4 or not (_password_like(token) or _camel_word(token)):
                    continue
                end = start + len(token)
            kind = "password" if _PASSWORD_HINT.search(key.group(0)) else "secret_keyword"
            yield (offset + start, offset + end, kind, 1)


# Every keyword of the library's DENYLIST holds one of these literals (checked at import;
# without it the hint regex scans the whole text): ``str.find`` locates the candidate lines
# much faster than a regex alternation, and the hint regex then runs on those lines only.
_KEYWORD_ANCHORS: Final = ("key", "pass", "pwd", "secret", "contrase")
_KEYWORD_ANCHORED: Final = all(any(a in word for a in _KEYWORD_ANCHORS) for word in DENYLIST)


def _keyword_hint_offsets(scan: _Scan) -> Iterator[int]:
    """Offsets of the keyword hits (at least one on each line holding a DENYLIST word)."""
    folded = scan.lower
    if folded is None or not _KEYWORD_ANCHORED:
        yield from (hint.start() for hint in _KEYWORD_HINT.finditer(scan))
        return
    offsets: list[int] = []
    for anchor in _KEYWORD_ANCHORS:
        at = folded.find(anchor)
        while at >= 0:
            offsets.append(at)
            at = folded.find(anchor, at + 1)
    checked: set[int] = set()
    for offset in sorted(offsets):
        line_start = folded.rfind("\n", 0, offset) + 1
        if line_start in checked:
            continue
        checked.add(line_start)
        line_end = folded.find("\n", offset)
        hint = _KEYWORD_HINT.plain.search(
            folded, line_start, len(folded) if line_end < 0 else line_end
        )
        if hint is not None:
            yield hint.start()


def _keyword_candidates(scan: _Scan) -> Iterator[_Candidate]:
    text = scan.text
    seen: set[int] = set()
    for offset in _keyword_hint_offsets(scan):
        line_start = text.rfind("\n", 0, offset) + 1
        if line_start in seen:
            continue
        seen.add(line_start)
        line_end = text.find("\n", offset)
        if line_end < 0:
            line_end = len(text)
        if line_end > line_start and text[line_end - 1] == "\r":
            line_end -= 1
        yield from _keyword_line(text[line_start:line_end], line_start)


def _entropy_candidates(scan: _Scan) -> Iterator[_Candidate]:
    """Quoted base64-looking tokens above the library's entropy limit."""
    if not scan.long_run or not scan.has("'", '"'):
        return  # 4.5 bits needs more than 22 characters
    for match in _ENTROPY.regex.finditer(scan.text):
        value = match.group(2)
        if len(value) <= 22:
            continue  # at most log2(22) < 4.5 bits
        if _ENTROPY.calculate_shannon_entropy(value) <= _ENTROPY.entropy_limit:
            continue
        if is_potential_uuid(value) or is_sequential_string(value) or is_templated_secret(value):
            continue
        yield (match.start(2), match.end(2), "high_entropy_string", 2)


# ---------------------------------------------------------------------------------------
# Project patterns: shapes the library misses (each one documented).

_P_PEM_BEGIN: Final = re.compile(r"-{4,5} ?BEGIN ([A-Z0-9 ]*?)PRIVATE KEY( BLOCK)? ?-{4,5}")
_P_PEM_END: Final = re.compile(r"-{4,5} ?END [A-Z0-9 ]*?PRIVATE KEY(?: BLOCK)? ?-{4,5}")
"""PEM private-key blocks, multi-line: the library flags only the BEGIN line. A block with
no END (a transcript cut short) is redacted to the end of the text."""

_P_PUTTY: Final = re.compile(r"PuTTY-User-Key-File-\d+:.*?(?:Private-MAC:[^\n]*|\Z)", re.DOTALL)
"""PuTTY key files, from the header to the Private-MAC line (library: header line only)."""

_P_TOKENS: Final[tuple[tuple[tuple[str, ...], _CiPattern, str], ...]] = (
    # OpenAI project/service/admin and legacy keys without the T3BlbkFJ marker that the
    # library's OpenAI plugin requires.
    (
        ("sk-",),
        _CiPattern(r"sk-(?<![\w-]sk-)(?!ant-)(?:proj-|svcacct-|admin-)?[a-z0-9_-]{20,}"),
        "openai_token",
    ),
    # The distinctive project/service/admin forms also after a hyphen, as inside an
    # identifier ("s-sk-proj-...": a session id built from a key).
    (
        ("sk-proj-", "sk-svcacct-", "sk-admin-"),
        _CiPattern(r"(?<![a-z0-9])sk-(?:proj|svcacct|admin)-[a-z0-9_-]{20,}"),
        "openai_token",
    ),
    # Anthropic keys.
    (("sk-ant-",), _CiPattern(r"(?<![a-z0-9])sk-ant-[a-z0-9_-]{20,}"), "anthropic_api_key"),
    # GitHub classic tokens in any case (the library's plugin: lower-case prefixes only).
    (
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        _CiPattern(r"(?<![a-z0-9])gh[pousr]_[a-z0-9_]{36}"),
        "github_token",
    ),
    # GitHub fine-grained personal access tokens (library: classic gh*_ tokens only).
    (("github_pat_",), _CiPattern(r"github_pat_[a-z0-9_]{22,}"), "github_token"),
    # GitLab tokens in any case (the library's plugin: lower-case prefixes only).
    (
        ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-", "gloas-"),
        _CiPattern(
            r"(?<![a-z0-9])(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|gloas)-[a-z0-9_-]{20,}"
        ),
        "gitlab_token",
    ),
    # Stripe live and test keys in any case, and webhook secrets (library: lower-case
    # sk_live_/rk_live_ only).
    (("k_live_", "k_test_"), _CiPattern(r"[sr]k_(?:live|test)_[a-z0-9]{16,}"), "stripe_access_key"),
    (("whsec_",), _CiPattern(r"whsec_[a-z0-9]{24,}"), "stripe_access_key"),
    # Google Cloud / Maps / Gemini API keys.
    (("aiza",), _CiPattern(r"aiza[0-9a-z_-]{35}"), "google_api_key"),
    # PyPI and SendGrid tokens with their prefixes in another case.
    (
        ("pypi-",),
        _CiPattern(r"pypi-(?:ageichlwas5vcmc|agendgvzdc5wexbplm9yzw)[a-z0-9_-]{70,}"),
        "pypi_token",
    ),
    (
        ("sg.",),
        _CiPattern(r"(?<![a-z0-9])sg\.[a-z0-9_-]{22}\.[a-z0-9_-]{43}"),
        "sendgrid_api_key",
    ),
)
"""Token prefixes are matched in any case: an upper-cased copy (``SK-PROJ-...``, ``GHP_...``)
is still the same secret. An OpenAI-style ``sk-`` prefix not in lower case must name a key
type (``proj-``, ...) or carry a 40-character body, as legacy keys do ("SK-" alone is also a
product-code prefix)."""

_P_OPENAI_TYPED: Final = re.compile(r"sk-(?:proj|svcacct|admin)-", re.IGNORECASE)


def _openai_case_ok(token: str) -> bool:
    return token.startswith("sk-") or _P_OPENAI_TYPED.match(token) is not None or len(token) >= 43


_P_AWS_SECRET: Final = _CiPattern(
    r"aws.{0,20}?(?:secret|key).{0,20}?[=:]\s*[\"']?([a-z0-9/+]{40})(?![a-z0-9/+])"
)
"""AWS secret access keys in unquoted assignments (the library requires quotes)."""

_P_AWS_SECRET_BARE: Final = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_P_AWS_CONTEXT: Final = re.compile(
    r"(?<![a-z])(?:aws|amazon)(?![a-z])|(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])",
    re.IGNORECASE,
)
_AWS_CONTEXT_REACH: Final = 120
"""An AWS secret access key with no assignment: a whole run of exactly 40 characters of the
base64 alphabet (no base64 character or ``=`` on either side), with at most four ``/`` and
upper and lower case, not inside a URL and not a base64/hex sequence. Anywhere in the text
it must also hold a digit, not be made of words (:func:`_made_of_words`: not
``handleUserAuthenticationRequestV2Handler``; a path's segments are words too) and not be
base64 of printable text (30 bytes of a sentence encode to exactly 40 characters; a random
key decodes to printable text with odds near 1e-13); such a shape-only find ranks with the
entropy detector, so a keyword or header detector around it names the span. With ``aws``,
``amazon`` or an ``AKIA``/``ASIA`` key id within 120 characters, a digit or ``/``/``+`` and
no leading ``/`` suffice. A random key lacks a digit about once in a thousand and then needs
that context. Lower-case hex (a git SHA-1), upper-case base32 and identifiers stay silent."""

_P_WORD_PIECE: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_P_LETTER_DIGIT: Final = re.compile(r"(?<=[A-Za-z])[0-9]|(?<=[0-9])[A-Za-z]")
_VOWELS: Final = frozenset("aeiouyAEIOUY")


def _made_of_words(token: str) -> bool:
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


def _base64_of_text(token: str) -> bool:
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


def _in_url(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` sits in a whitespace-delimited word holding ``://``."""
    left = max(text.rfind(" ", 0, start), text.rfind("\n", 0, start))
    right = len(text)
    for stop in (" ", "\n"):
        at = text.find(stop, end)
        if 0 <= at < right:
            right = at
    word = text[left + 1 : right]
    return "://" in word or word.lower().startswith("www.")


def _upper_and_lower(body: str) -> bool:
    return any(c.islower() for c in body) and any(c.isupper() for c in body)


def _two_classes(body: str) -> bool:
    return _char_classes(body) >= 2


_P_OWN_TOKENS: Final[tuple[tuple[str, re.Pattern[str], str, Callable[[str], bool]], ...]] = (
    (
        "mlt_",
        re.compile(r"(?<![A-Za-z0-9_-])mlt_[A-Za-z0-9_-]{43}"),
        "mcp_bearer_token",
        _upper_and_lower,
    ),
    ("npm_", re.compile(r"(?<![A-Za-z0-9_])(?i:npm_)[A-Za-z0-9]{36}"), "npm_token", _two_classes),
    (
        "hf_",
        re.compile(r"(?<![A-Za-z0-9_])(?i:hf_)[A-Za-z0-9]{34,}"),
        "huggingface_token",
        _two_classes,
    ),
)
"""Tokens found by shape alone: (literal, pattern, kind, what the body needs). The
memory-ledger MCP bearer token (``mlt_`` + ``secrets.token_urlsafe(32)``: 43 URL-safe
characters) needs upper and lower case, so a snake_case identifier after ``mlt_`` is not
one (a random body lacks either with odds near 1e-10; a digit is missing from about one
token in a thousand, so digits are not required); npm (``npm_`` + 36 alphanumerics) and
Hugging Face (``hf_`` + 34+ letters and digits) tokens need two of lower case, upper case
and digits."""


def _char_classes(value: str) -> int:
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
    )


def _aws_secret_candidates(scan: _Scan) -> Iterator[_Candidate]:
    text = scan.text
    context: bool | None = None
    for match in _P_AWS_SECRET_BARE.finditer(text):
        value = match.group()
        if value.count("/") > 4 or not _upper_and_lower(value) or is_sequential_string(value):
            continue
        start, end = match.span()
        if (
            any(c.isdigit() for c in value)
            and not _made_of_words(value)
            and not _base64_of_text(value)
            and not _in_url(text, start, end)
        ):
            # A guess from the shape alone: a keyword or header detector names it better.
            yield (start, end, "aws_secret_access_key", 2)
            continue
        if value.startswith("/") or not any(c.isdigit() or c in "/+" for c in value):
            continue
        if context is None:
            context = scan.has_ci("aws", "amazon") or scan.has("AKIA", "ASIA")
        if not context:
            continue
        window_start = max(0, start - _AWS_CONTEXT_REACH)
        if _P_AWS_CONTEXT.search(text, window_start, start) or _P_AWS_CONTEXT.search(
            text, end, end + _AWS_CONTEXT_REACH
        ):
            yield (start, end, "aws_secret_access_key", 0)


_P_AUTHORIZATION: Final = _CiPattern(
    r"authorization\s*[:=]\s*[\"']?(?:(bearer|basic|token|bot|digest|apikey)\s+)?"
    r"([a-z0-9\-._~+/=:]{8,})"
)
"""``Authorization:`` header values: after a scheme word, or holding letters and digits."""

_P_BEARER: Final = _CiPattern(r"bearer\s+([a-z0-9\-._~+/]{16,}=*)")
"""``Bearer <token>`` anywhere: a token of 16+ characters with letters and digits."""

_P_PASSWORD_IS: Final = _CiPattern(
    r"pass(?:word|wd|phrase|code)\s+(?:is|was)\s*:?\s*[\"'`]?([^\s\"'`]{4,})"
)
"""Prose: "my password is hunter2". The value must hold a digit or a symbol, or be a
camel-case word of 8+ letters (:func:`_camel_word`)."""

_P_SHORT_PASSWORD: Final = _CiPattern(
    r"(?<![a-z0-9_])(pass|pin)(?:\s*[:=]|\s+(?:is|was)\b:?)\s*[\"'`]?([^\s\"'`]+)"
)
_P_MEASURE: Final = re.compile(r"\d+(?:[.,]\d+)*[A-Za-z]{0,3}|[A-Za-z]{1,3}-?\d+")
_P_PIN: Final = re.compile(r"\d{4,12}")


def _camel_word(value: str) -> bool:
    """A word of 8+ letters with capitals inside ("CorrectHorseBatteryStaple"): a password
    made of words; "Secret", "SECRET" and "secret" are not."""
    if len(value) < 8 or not value.isalpha() or not value.isascii():
        return False
    uppers = sum(c.isupper() for c in value)
    return uppers >= 2 and uppers < len(value) and re.search(r"[a-z][A-Z]", value) is not None


def _short_password_value(keyword: str, value: str) -> bool:
    """Whether ``value`` after ``pass`` or ``pin`` is a password rather than English."""
    if keyword == "pin":
        return _P_PIN.fullmatch(value) is not None
    if _random_looking(value) or _camel_word(value):
        return True
    if value.isdigit():
        return len(value) >= 6
    if any(c in _STRONG_SYMBOLS for c in value):
        return len(value) >= 4
    return len(value) >= 6 and _letters_and_digits(value) and not _P_MEASURE.fullmatch(value)


_P_LOGIN: Final = _CiPattern(
    r"(?<![a-z])(?:log(?:s|ged|ging)?\s*(?:in|on)(?:to)?|sign(?:s|ed|ing)?\s*(?:in|on)(?:to)?"
    r"|ssh(?:es|ed|'d|ing)?\s+(?:in)?to|connect(?:s|ed|ing)?\s+(?:in)?to"
    r"|authenticat(?:e|es|ed|ing))(?![a-z])[^\n]{0,40}?(?<![a-z])as\s+(?:the\s+)?"
    r"(?:user(?:name)?\s+)?[\"'`]?[\w.@\\-]+[\"'`]?\s+(?:with|using)\s+"
    r"(?:(?:(?:the|a|an|her|his|their|my|our|your|its)\s+)?"
    r"(pass(?:word|phrase|wd|code)?|pw|pwd)(?:\s+(?:of|is))?\s*[:=]?\s*)?"
    r"[\"'`]?([^\s\"'`]+)"
)
_LOGIN_ANCHORS: Final = ("log", "sign", "ssh", "connect", "authenticat")
"""Prose logins: a login verb ("logs into", "logged in to", "signs in to", "ssh to",
"connects to", "authenticates"), then within 40 characters "as <user> with|using <value>",
optionally "with the password <value>" ("logs into the NAS as admin with Zq8!vR2#mK9pL4xW",
"ssh to the box as root using hunter2!x"). After a password keyword the value must look like
a password (:func:`_short_password_value`); without one it must too, and a camel-case word
does not count ("connects to the VPN as guest using WireGuard"). "logs into the NAS as admin
with her laptop" and "connects to the office as usual with a smile" stay silent."""


def _anchored_matches(
    pattern: re.Pattern[str], folded: str, anchors: tuple[str, ...]
) -> Iterator[re.Match[str]]:
    """``pattern.match`` tried at each offset of ``folded`` where an anchor starts."""
    starts: list[int] = []
    for anchor in anchors:
        at = folded.find(anchor)
        while at >= 0:
            starts.append(at)
            at = folded.find(anchor, at + 1)
    for start in sorted(starts):
        match = pattern.match(folded, start)
        if match is not None:
            yield match


def _login_candidates(scan: _Scan) -> Iterator[_Candidate]:
    """Matches of :data:`_P_LOGIN`, tried at the verbs' offsets in the lowercased text."""
    text = scan.text
    folded = scan.lower
    if folded is None:
        matches: Iterator[re.Match[str]] = _P_LOGIN.finditer(scan)
    elif any(anchor in folded for anchor in _LOGIN_ANCHORS):
        matches = _anchored_matches(_P_LOGIN.plain, folded, _LOGIN_ANCHORS)
    else:
        return
    for match in matches:
        begin, end = match.span(2)
        value = text[begin:end].rstrip(".,;!?)")
        if not value or any(c in "()[]{}" for c in value) or _value_is_reference(value):
            continue
        if _names_no_secret(value) or not _short_password_value("pass", value):
            continue
        if match.group(1) is None and _camel_word(value):
            continue
        yield (begin, begin + len(value), "password", 1)


_P_KEY_IS: Final = _CiPattern(r"(?:key|token|secret)s?\s*(?:[:=]|is\b|was\b)\s*[\"'`]?([^\s\"'`]+)")
_P_KEY_IS_PREFIX: Final = re.compile(
    r"(?:^|[^a-z])(?:api|access|secret|auth|refresh|session|client|private)[ _-]?$"
)
"""Prose: "API key: abc123def456ghi", "my access token is ...": letters and digits, 12+."""

_OPEN_QUOTE: Final = "\"'`\u2018\u201c\u00ab\u300c\u300e"
_VALUE: Final = r"[" + _OPEN_QUOTE + r"]?([!#-&(-_a-~\u00a1-\u02af\u0370-\u052f]+)"
"""An optionally quoted value: printable ASCII, Latin, Greek and Cyrillic letters, no quote
(so a value ends at a quote, a space, or CJK text such as a trailing ``です``)."""

_P_CREDENTIAL: Final = _CiPattern(
    r"(token|secret|credential|passphrase|passcode|passwd|password|pwd"
    r"|passwort|kennwort|contraseña|contrasena|mot[ _-]de[ _-]passe|senha|wachtwoord"
    r"|lösenord|losenord|passord|adgangskode|hasło|haslo|пароль|şifre|sifre"
    r"|パスワード|密码|密碼|비밀번호)s?[\]'\"]{0,2}"
    r"(?:\s*(:=|=>|=(?!=)|:(?!:))|\s+(?:is|was|ist|lautet|es|est|é|era|war)\b:?"
    r"|\s*(?:は|는|은|是|为|為):?)\s*" + _VALUE
)
"""Keyword assignments the library misses or gates on English: ``token: <value>``,
``auth_token = <value>``, ``session token is <value>``, ``passphrase: <value>``, and
password assignments in other languages (German, Spanish, French, Portuguese, Dutch,
Scandinavian, Polish, Russian, Turkish, Japanese, Chinese, Korean) with the local "is"
(``ist``, ``es``, ``est``, ``é``, ``は``, ...); full-width colons arrive as ``:`` (the scan
reads NFKC text). The keyword is the last part of the key name (``auth_token``,
``accessToken``; not ``tokenizer``). A token, secret or credential value must look random
(:func:`_random_looking`); a password value may instead be any one-token value of 4+
characters after ``=`` (or quoted after ``:``), or one with a digit or a symbol after ``:``
or "is". "my secret: I love jazz", "the secret is to start early" and "token of
appreciation" stay silent."""

# Where a match of _P_CREDENTIAL can start: the pattern is tried only at these literals'
# offsets (``str.find`` is many times faster than a regex scan for a keyword alternation).
_CREDENTIAL_ANCHORS: Final = (
    "token",
    "secret",
    "credential",
    "pass",  # passphrase, passcode, passwd, password, passwort, passord, mot de passe
    "pwd",
    "kennwort",
    "contrase",
    "senha",
    "wachtwoord",
    "losenord",
    "adgangskode",
    "haslo",
    "sifre",
)
_CREDENTIAL_ANCHORS_NON_ASCII: Final = (
    "lösenord",
    "hasło",
    "пароль",
    "şifre",
    "パスワード",
    "密码",
    "密碼",
    "비밀번호",
)
_TOKEN_KEYWORDS: Final = frozenset({"token", "secret", "credential"})
_RANDOM_CHARS: Final = re.compile(r"[A-Za-z0-9_\-+/=.~]+")
_STRONG_SYMBOLS: Final = frozenset("@#$%^&*+=~/\\|<>")


def _random_looking(value: str) -> bool:
    """A token (16+ characters mixing letters and digits) or a password (8+ characters with
    a symbol and two of lower case, upper case and digits); not a path or a URL."""
    if value[:1] in "/~." or "://" in value:
        return False
    if len(value) >= 16 and _RANDOM_CHARS.fullmatch(value) and _letters_and_digits(value):
        return not is_sequential_string(value)
    if len(value) >= 8 and any(c in _STRONG_SYMBOLS for c in value):
        classes = (
            any(c.islower() for c in value)
            + any(c.isupper() for c in value)
            + any(c.isdigit() for c in value)
        )
        return classes >= 2
    return False


def _starts_key_part(text: str, start: int) -> bool:
    """Whether ``text[start]`` begins a part of a key name (``auth_token``, ``apiToken``);
    CJK keywords have no word boundary to check."""
    if start == 0 or ord(text[start]) >= 0x2E80:
        return True
    before = text[start - 1]
    return not before.isalnum() or (before.islower() and text[start].isupper())


def _credential_matches(scan: _Scan) -> Iterator[re.Match[str]]:
    """Matches of :data:`_P_CREDENTIAL` (groups: keyword, operator, value), tried at the
    anchors' offsets; offsets index ``scan.text``."""
    folded = scan.lower
    if folded is None:
        yield from _P_CREDENTIAL.finditer(scan)
        return
    anchors: tuple[str, ...] = _CREDENTIAL_ANCHORS
    if not folded.isascii():
        anchors += _CREDENTIAL_ANCHORS_NON_ASCII
    starts: list[int] = []
    for anchor in anchors:
        at = folded.find(anchor)
        while at >= 0:
            starts.append(at)
            at = folded.find(anchor, at + 1)
    pattern = _P_CREDENTIAL.plain
    for start in sorted(starts):
        match = pattern.match(folded, start)
        if match is None and folded.startswith("mot", start - 7):
            match = pattern.match(folded, start - 7)  # "mot de passe", found at "pass"
        if match is not None:
            yield match


def _credential_candidates(scan: _Scan) -> Iterator[_Candidate]:
    text = scan.text
    for match in _credential_matches(scan):
        if not _starts_key_part(text, match.start(1)):
            continue
        start, end = match.span(3)
        value = text[start:end].rstrip(".,;!?)")
        if not value or any(c in "()[]{}" for c in value):
            continue  # a call, an index or a template: code about a secret
        if _value_is_reference(value) or _names_no_secret(value):
            continue
        keyword = match.group(1).lower()
        if keyword == "pwd" and value[:1] in "/~":
            continue  # PWD=/home/me is a working directory
        password = keyword not in _TOKEN_KEYWORDS
        quoted = start > 0 and text[start - 1] in _OPEN_QUOTE
        end = start + len(value)
        if not _random_looking(value):
            if not password or len(value) < 4:
                continue
            operator = match.group(2) or ""
            if "=" in operator and not quoted:
                # Like the library's ``password = a b c``: the value may be a passphrase of
                # several words, so the rest of the line goes.
                line_end = text.find("\n", end)
                end = len(text[: len(text) if line_end < 0 else line_end].rstrip())
            elif not (operator == ":" and quoted) and not (
                _password_like(value) or _camel_word(value)
            ):
                continue
        yield (start, end, "password" if password else "secret_keyword", 1)


def _project_candidates(scan: _Scan) -> Iterator[_Candidate]:
    text = scan.text
    if scan.has("PRIVATE KEY"):
        for begin in _P_PEM_BEGIN.finditer(text):
            closing = _P_PEM_END.search(text, begin.end())
            yield (begin.start(), closing.end() if closing else len(text), "private_key", 0)
    if scan.has("PuTTY-User-Key-File-"):
        for match in _P_PUTTY.finditer(text):
            yield (match.start(), match.end(), "private_key", 0)
    for literals, token_pattern, kind in _P_TOKENS if scan.long_run else ():
        if scan.has_ci(*literals):
            for match in token_pattern.finditer(scan):
                token = text[match.start() : match.end()]
                if not _letters_and_digits(token):
                    continue
                if kind == "openai_token" and not _openai_case_ok(token):
                    continue
                yield (*_widen(text, *match.span()), kind, 0)
    if scan.has_ci("aws"):
        for match in _P_AWS_SECRET.finditer(scan):
            yield (*match.span(1), "aws_secret_access_key", 0)
    if scan.has_ci("authorization"):
        for match in _P_AUTHORIZATION.finditer(scan):
            start, end = match.span(2)
            if match.group(1) or _letters_and_digits(text[start:end]):
                yield (*_widen(text, start, end), "authorization_header", 1)
    if scan.has_ci("bearer"):
        for match in _P_BEARER.finditer(scan):
            start, end = match.span(1)
            if _letters_and_digits(text[start:end]):
                yield (*_widen(text, start, end), "bearer_token", 1)
    if scan.has_ci("pass"):
        for match in _P_PASSWORD_IS.finditer(scan):
            start, end = match.span(1)
            value = text[start:end].rstrip(".,;!?)")
            if (_password_like(value) or _camel_word(value)) and not _value_is_reference(value):
                yield (start, start + len(value), "password", 1)
    if scan.has_ci("pass", "pin"):
        for match in _P_SHORT_PASSWORD.finditer(scan):
            start, end = match.span(2)
            value = text[start:end].rstrip(".,;!?)")
            keyword = text[match.start(1) : match.end(1)].lower()
            if not value or any(c in "()[]{}" for c in value) or _value_is_reference(value):
                continue
            if _names_no_secret(value) or not _short_password_value(keyword, value):
                continue
            yield (start, start + len(value), "password", 1)
    if scan.has_ci(" as "):
        yield from _login_candidates(scan)
    if scan.long_run:
        for literal, shape, kind, body_ok in _P_OWN_TOKENS:
            if scan.has_ci(literal):
                for match in shape.finditer(text):
                    if body_ok(match.group()[len(literal) :]):
                        yield (*_widen(text, *match.span()), kind, 0)
    if scan.long_run:
        yield from _aws_secret_candidates(scan)
    if scan.has_ci("key", "token", "secret"):
        folded = scan.lower if scan.lower is not None else text.lower()
        for match in _P_KEY_IS.finditer(scan):
            if not _P_KEY_IS_PREFIX.search(folded, max(0, match.start() - 12), match.start()):
                continue
            start, end = match.span(1)
            value = text[start:end].rstrip(".,;!?)")
            if len(value) >= 12 and _letters_and_digits(value):
                yield (start, start + len(value), "api_key", 1)
    yield from _credential_candidates(scan)


_SOURCES: Final[tuple[Callable[[_Scan], Iterator[_Candidate]], ...]] = (
    _plugin_candidates,
    _project_candidates,
    _keyword_candidates,
    _entropy_candidates,
)


def _mask_markers(text: str) -> str:
    """Hide earlier redaction markers (same length, so offsets hold)."""
    if "[REDACTED:" not in text:
        return text
    return _MARKER.sub(lambda m: "*" * len(m.group(0)), text)


def _merge(candidates: list[_Candidate], masked: str) -> list[SecretSpan]:
    spans: list[SecretSpan] = []
    group: list[_Candidate] = []
    group_end = -1

    def flush() -> None:
        if group:
            kind = min(group, key=lambda c: (c[3], c[0] - c[1], c[0], c[2]))[2]
            spans.append(SecretSpan(group[0][0], group_end, kind))

    for cand in sorted(candidates):
        start, end = cand[0], cand[1]
        if start >= end or not masked[start:end].strip("* \t\r\n"):
            continue
        if start < group_end:
            group.append(cand)
            group_end = max(group_end, end)
        else:
            flush()
            group = [cand]
            group_end = end
    flush()
    return spans


# ---------------------------------------------------------------------------------------
# Compatibility forms: text that is not NFKC-normalized (full-width ``ｓｋ-proj-...``,
# ``パスワード：...``, ligatures, half-width kana) is scanned in its NFKC form and the spans
# are mapped back. The text is cut into clusters (a character with the combining marks and
# voicing marks that may compose with it), each normalized alone; a cluster that normalizes
# to one character, or to itself, maps character for character. A span touching any other
# cluster (``ﬁ`` -> ``fi``, ``ﾊﾟ`` -> ``パ``) is widened to the whole original token, between
# spaces or quotes, so no part of the secret stays behind.

_NON_ASCII_RUN: Final = re.compile(r"[^\x00-\x7f]+")
_WORDS_AND_SPACES: Final = re.compile(r"\s+|\S+")
_TOKEN_STOPS: Final = frozenset("\"'`")

# (normalized start, normalized end, original start, original end, maps 1:1)
_Segment = tuple[int, int, int, int, bool]


def _joins_previous(char: str) -> bool:
    """Whether ``char`` may compose with the character before it under NFKC."""
    if unicodedata.combining(char):
        return True
    code = ord(char)
    return (
        code in (0xFF9E, 0xFF9F)  # half-width kana voicing marks
        or 0x1160 <= code <= 0x11FF  # Hangul medial vowels and final consonants
        or 0xD7B0 <= code <= 0xD7FF
        or 0x3131 <= code <= 0x318E  # Hangul compatibility jamo
        or 0xFFA0 <= code <= 0xFFDC  # half-width Hangul jamo
    )


def _fine_clusters(text: str) -> Iterator[tuple[int, int]]:
    """ASCII runs (stable under NFKC) and, around non-ASCII runs, composing clusters."""
    cursor = 0
    for run in _NON_ASCII_RUN.finditer(text):
        start = max(run.start() - 1, 0)  # "e" + U+0301 composes to one character
        if start > cursor:
            yield cursor, start
        cluster = start
        for i in range(start + 1, run.end()):
            if not _joins_previous(text[i]):
                yield cluster, i
                cluster = i
        yield cluster, run.end()
        cursor = run.end()
    if cursor < len(text):
        yield cursor, len(text)


def _build_view(text: str, clusters: Iterator[tuple[int, int]]) -> tuple[str, list[_Segment]]:
    pieces: list[str] = []
    segments: list[_Segment] = []
    position = 0
    for start, end in clusters:
        chunk = text[start:end]
        normal = chunk if chunk.isascii() else unicodedata.normalize("NFKC", chunk)
        exact = normal == chunk or (end - start == 1 and len(normal) == 1)
        stop = position + len(normal)
        if exact and segments and segments[-1][4]:
            segments[-1] = (segments[-1][0], stop, segments[-1][2], end, True)
        else:
            segments.append((position, stop, start, end, exact))
        pieces.append(normal)
        position = stop
    return "".join(pieces), segments


class _NfkcView:
    """The NFKC form of a text, with a map from its offsets back to the original's."""

    __slots__ = ("original", "text", "_segments", "_starts")

    def __init__(self, original: str) -> None:
        normal = unicodedata.normalize("NFKC", original)
        text, segments = _build_view(original, _fine_clusters(original))
        if text != normal:  # a composition across clusters: fall back to whole words
            words = (m.span() for m in _WORDS_AND_SPACES.finditer(original))
            text, segments = _build_view(original, words)
        if text != normal:
            text, segments = normal, [(0, len(normal), 0, len(original), False)]
        self.original = original
        self.text = text
        self._segments = segments
        self._starts = [segment[0] for segment in segments]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span of ``text[start:end]`` (widened to whole tokens if not 1:1)."""
        first = bisect_right(self._starts, start) - 1
        last = bisect_right(self._starts, end - 1) - 1
        head, tail = self._segments[first], self._segments[last]
        start = head[2] + start - head[0] if head[4] else head[2]
        end = tail[2] + end - tail[0] if tail[4] else tail[3]
        if all(segment[4] for segment in self._segments[first : last + 1]):
            return start, end
        original = self.original
        while start > 0 and not _token_stop(original[start - 1]):
            start -= 1
        while end < len(original) and not _token_stop(original[end]):
            end += 1
        return start, end


def _token_stop(char: str) -> bool:
    return char.isspace() or char in _TOKEN_STOPS


def _candidates(text: str) -> list[_Candidate]:
    scan = _Scan(text)
    return [c for source in _SOURCES for c in source(scan)]


ZERO_WIDTH: Final = frozenset("\u200b\u200c\u200d\u2060\ufeff")
"""Invisible characters that can split a secret without changing how it looks: ZERO WIDTH
SPACE, ZERO WIDTH NON-JOINER, ZERO WIDTH JOINER, WORD JOINER and ZERO WIDTH NO-BREAK SPACE
(byte order mark)."""

_P_ZERO_WIDTH: Final = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")


def find_secrets(text: str) -> list[SecretSpan]:
    """Secret-shaped spans of ``text``: sorted, non-overlapping, offsets into ``text``.

    Overlapping detections merge into one span, named by the most specific detector.
    Existing ``[REDACTED:<kind>]`` markers are never reported. Text that is not in NFKC form
    (full-width letters, ligatures) is scanned in that form and the spans mapped back; a
    span over a character that NFKC does not map one to one covers its whole original token.
    Zero-width characters (:data:`ZERO_WIDTH`) are removed before the scan; a span found
    across them covers the whole original stretch, the invisible characters included.
    Never raises for a ``str``. Results for texts of at most :data:`_CACHED_UP_TO`
    characters are cached (a statement is scanned once however many surfaces check it:
    a command's validation, its redaction and the door of every event that carries it).
    """
    if len(text) <= _CACHED_UP_TO:
        return list(_find_cached(text))
    return _find_uncached(text)


_CACHED_UP_TO: Final = 1024


@lru_cache(maxsize=16384)
def _find_cached(text: str) -> tuple[SecretSpan, ...]:
    return tuple(_find_uncached(text))


def clear_scan_cache() -> None:
    """Forget every cached scan result (after an erasure: the cache holds scanned texts)."""
    _find_cached.cache_clear()


def _find_uncached(text: str) -> list[SecretSpan]:
    if _P_ZERO_WIDTH.search(text) is None:
        return _find_visible(text)
    kept = [i for i, char in enumerate(text) if char not in ZERO_WIDTH]
    visible = "".join(text[i] for i in kept)
    spans = [
        SecretSpan(kept[span.start], kept[span.end - 1] + 1, span.kind)
        for span in _find_visible(visible)
    ]
    return spans


def _find_visible(text: str) -> list[SecretSpan]:
    masked = _mask_markers(text)
    if masked.isascii() or unicodedata.is_normalized("NFKC", masked):
        candidates = _candidates(masked)
    else:
        view = _NfkcView(masked)
        candidates = [
            (*view.span(start, end), kind, rank)
            for start, end, kind, rank in _candidates(_mask_markers(view.text))
            if start < end
        ]
    if not candidates:
        return []
    return _merge(candidates, masked)


def contains_secret(text: str) -> bool:
    """Whether :func:`find_secrets` finds at least one span in ``text``."""
    return bool(find_secrets(text))


# ---------------------------------------------------------------------------------------
# Whole structured fields (an item's value, subject, predicate, a tag, a label): a field can
# hold a secret with no keyword around it, or under a label that names a credential.

_FIELD_SYMBOLS: Final = frozenset("!@#$%^&*+=~|<>?")
_P_EMAIL: Final = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")
_P_HANDLE: Final = re.compile(r"[@#]\w+")
_P_HEX: Final = re.compile(r"[0-9a-fA-F]+")
_FIELD_QUOTES: Final = "\"'`\u2018\u2019\u201c\u201d"

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
    token = unicodedata.normalize("NFKC", _P_ZERO_WIDTH.sub("", text)).strip()
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
        and _char_classes(token) == 3
        and not _FIELD_SYMBOLS.isdisjoint(token)
        and not _address_like(token)
    )


def _random_token(token: str) -> bool:
    """20+ token characters mixing letters and digits that are not a uuid, a hex digest, a
    path, a URL or words and numbers (:func:`_made_of_words`)."""
    return (
        len(token) >= 20
        and _RANDOM_CHARS.fullmatch(token) is not None
        and _letters_and_digits(token)
        and _P_HEX.fullmatch(token.replace("-", "")) is None
        and not is_potential_uuid(token)
        and not _address_like(token)
        and not is_sequential_string(token)
        and not _made_of_words(token)
    )


def _credential_value(label: str, token: str) -> bool:
    """Whether one-token ``token`` is a plausible value of a field labelled ``label``."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", unicodedata.normalize("NFKC", label))
    words = " ".join(re.sub(r"[_\-.:/]+", " ", words).lower().split())
    match = _P_CREDENTIAL_LABEL.search(words)
    if match is None or not token or any(c.isspace() for c in token):
        return False
    if _value_is_reference(token) or _names_no_secret(token) or _address_like(token):
        return False
    if token.lower() in _NOT_A_VALUE or any(c in "()[]{}" for c in token):
        return False
    if match.group(1):  # a PIN
        return _P_PIN.fullmatch(token) is not None or _short_password_value("pass", token)
    if match.group(2):  # a password: any one token of 4+ characters, as after "password ="
        return len(token) >= 4
    return _short_password_value("pass", token)


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
      value (:func:`_short_password_value`: a symbol, letters with digits, 6+ digits, a
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
    if not any(c.isspace() for c in token) and (_generated_password(token) or _random_token(token)):
        return True
    return label is not None and _credential_value(label, token)


_MAX_PASSES: Final = 4


def redact(text: str) -> Redaction:
    """Replace each secret span of ``text`` by ``[REDACTED:<kind>]``.

    Text without secrets is returned unchanged (``count == 0``, ``kinds == ()``). The
    result holds nothing :func:`find_secrets` detects: a replacement that exposes a new
    shape (rare: two secrets glued together) is redacted again, up to a few passes.
    """
    count = 0
    kinds: set[str] = set()
    for _ in range(_MAX_PASSES):
        spans = find_secrets(text)
        if not spans:
            break
        pieces: list[str] = []
        cursor = 0
        for span in spans:
            pieces.append(text[cursor : span.start])
            pieces.append(f"[REDACTED:{span.kind}]")
            cursor = span.end
        pieces.append(text[cursor:])
        text = "".join(pieces)
        count += len(spans)
        kinds.update(span.kind for span in spans)
    return Redaction(text=text, count=count, kinds=tuple(sorted(kinds)))
