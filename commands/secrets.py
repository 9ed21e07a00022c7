"""Secret detection and redaction (DESIGN.md section 6).

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
  be one token that contains a digit or a symbol. Unquoted values that are code about a
  secret are skipped: comparisons (``password == other``), types and nulls
  (``api_key: str | None``), dotted references (``settings.API_KEY``), and paths after
  ``PWD=``; the library's filters skip ``${VAR}``, ``<token>``, ``{key}`` and ``f(x)``.
* Shapes the library misses: whole PEM / PuTTY private-key blocks (the library flags only
  the ``BEGIN`` line), ``sk-proj-``/``sk-svcacct-``/legacy OpenAI-style keys without the
  ``T3BlbkFJ`` marker, Anthropic ``sk-ant-`` keys, GitHub fine-grained ``github_pat_``
  tokens, Stripe test keys and webhook secrets, Google ``AIza`` API keys, unquoted AWS
  secret access keys, ``Authorization:`` headers and ``Bearer`` tokens, and "my password
  is X" / "API key: X" phrasing.
* Not used: the hex high-entropy plugin (quoted commit hashes and digests are common in
  agent transcripts and are not secrets) and the public-IP plugin (an address is not a
  credential).

Redaction markers ``[REDACTED:<kind>]`` are opaque to detection, so redaction is idempotent.
Speed: about 0.1 ms for a 2,000-character conversational transcript, about 0.5 ms for
code-heavy text (literal gates skip the patterns whose anchors are absent).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
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

__all__ = ["Redaction", "SecretSpan", "contains_secret", "find_secrets", "redact"]


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
_DOTTED_REFERENCE: Final = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+[,;]?")


def _names_no_secret(token: str) -> bool:
    """An unquoted value that is a type (``str``, ``Optional[str]``), a null/boolean, or a
    dotted reference (``settings.API_KEY``): code about a secret, not the secret."""
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
                # "my secret: be kind" is English; "password: hunter2" is a credential.
                token = value.split()[0].rstrip(".,;!?")
                if not token or not _password_like(token):
                    continue
                end = start + len(token)
            kind = "password" if _PASSWORD_HINT.search(key.group(0)) else "secret_keyword"
            yield (offset + start, offset + end, kind, 1)


def _keyword_candidates(scan: _Scan) -> Iterator[_Candidate]:
    text = scan.text
    seen: set[int] = set()
    for hint in _KEYWORD_HINT.finditer(scan):
        line_start = text.rfind("\n", 0, hint.start()) + 1
        if line_start in seen:
            continue
        seen.add(line_start)
        line_end = text.find("\n", hint.end())
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

_P_TOKENS: Final[tuple[tuple[str, re.Pattern[str], str], ...]] = (
    # OpenAI project/service/admin and legacy keys without the T3BlbkFJ marker that the
    # library's OpenAI plugin requires.
    (
        "sk-",
        re.compile(r"sk-(?<![\w-]sk-)(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
        "openai_token",
    ),
    # Anthropic keys.
    ("sk-ant-", re.compile(r"sk-ant-(?<![\w-]sk-ant-)[A-Za-z0-9_-]{20,}"), "anthropic_api_key"),
    # GitHub fine-grained personal access tokens (library: classic gh*_ tokens only).
    ("github_pat_", re.compile(r"github_pat_[A-Za-z0-9_]{22,}"), "github_token"),
    # Stripe test keys and webhook secrets (library: sk_live_/rk_live_ only).
    ("k_test_", re.compile(r"(?:sk|rk)_test_[A-Za-z0-9]{16,}"), "stripe_access_key"),
    ("whsec_", re.compile(r"whsec_[A-Za-z0-9]{24,}"), "stripe_access_key"),
    # Google Cloud / Maps / Gemini API keys.
    ("AIza", re.compile(r"AIza[0-9A-Za-z_-]{35}"), "google_api_key"),
)

_P_AWS_SECRET: Final = _CiPattern(
    r"aws.{0,20}?(?:secret|key).{0,20}?[=:]\s*[\"']?([a-z0-9/+]{40})(?![a-z0-9/+])"
)
"""AWS secret access keys in unquoted assignments (the library requires quotes)."""

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
"""Prose: "my password is hunter2". The value must hold a digit or a symbol."""

_P_KEY_IS: Final = _CiPattern(r"(?:key|token|secret)s?\s*(?:[:=]|is\b|was\b)\s*[\"'`]?([^\s\"'`]+)")
_P_KEY_IS_PREFIX: Final = re.compile(
    r"(?:^|[^a-z])(?:api|access|secret|auth|refresh|session|client|private)[ _-]?$"
)
"""Prose: "API key: abc123def456ghi", "my access token is ...": letters and digits, 12+."""


def _project_candidates(scan: _Scan) -> Iterator[_Candidate]:
    text = scan.text
    if scan.has("PRIVATE KEY"):
        for begin in _P_PEM_BEGIN.finditer(text):
            closing = _P_PEM_END.search(text, begin.end())
            yield (begin.start(), closing.end() if closing else len(text), "private_key", 0)
    if scan.has("PuTTY-User-Key-File-"):
        for match in _P_PUTTY.finditer(text):
            yield (match.start(), match.end(), "private_key", 0)
    for literal, pattern, kind in _P_TOKENS:
        if literal in text:
            for match in pattern.finditer(text):
                if _letters_and_digits(match.group(0)):
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
            if _password_like(value) and not _value_is_reference(value):
                yield (start, start + len(value), "password", 1)
    if scan.has_ci("key", "token", "secret"):
        folded = scan.lower if scan.lower is not None else text.lower()
        for match in _P_KEY_IS.finditer(scan):
            if not _P_KEY_IS_PREFIX.search(folded, max(0, match.start() - 12), match.start()):
                continue
            start, end = match.span(1)
            value = text[start:end].rstrip(".,;!?)")
            if len(value) >= 12 and _letters_and_digits(value):
                yield (start, start + len(value), "api_key", 1)


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


def find_secrets(text: str) -> list[SecretSpan]:
    """Secret-shaped spans of ``text``: sorted, non-overlapping, offsets into ``text``.

    Overlapping detections merge into one span, named by the most specific detector.
    Existing ``[REDACTED:<kind>]`` markers are never reported. Never raises for a ``str``.
    """
    scan = _Scan(_mask_markers(text))
    candidates = [c for source in _SOURCES for c in source(scan)]
    if not candidates:
        return []
    return _merge(candidates, scan.text)


def contains_secret(text: str) -> bool:
    """Whether :func:`find_secrets` finds at least one span in ``text``."""
    return bool(find_secrets(text))


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
