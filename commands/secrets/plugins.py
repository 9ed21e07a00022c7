"""The glue to Yelp's ``detect-secrets``: its regex plugins, keyword assignments, entropy.

The plugins are called directly on the text (``plugin.denylist`` patterns and
``plugin.analyze_string``), not through ``scan_line``, which reads global settings, may
verify secrets over the network and, in its "eager" mode, flags unquoted English. Not used:
the hex high-entropy plugin (quoted commit hashes and digests are common in agent
transcripts and are not secrets) and the public-IP plugin (an address is not a credential).

Keyword assignments (``password = hunter2``) must name a credential as a whole word part of
the key (``db_password``, ``apiKey``, ``aws_secret_access_key``; not ``secretary``), and an
unquoted value after a plain English word and a colon ("my secret: be kind") must be one
token of 4+ characters that contains a digit or a symbol. Unquoted values that are code
about a secret are skipped: comparisons (``password == other``), types and nulls
(``api_key: str | None``), dotted references (``settings.API_KEY``, ``os.environ[...]``), and
paths after ``PWD=``; the library's filters skip ``${VAR}``, ``<token>``, ``{key}`` and
``f(x)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Final

from detect_secrets.filters.heuristic import (
    is_indirect_reference,
    is_potential_uuid,
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

from memory_ledger.commands.secrets.rule import RulePattern
from memory_ledger.commands.secrets.scan import (
    LEFT_TOKEN,
    Candidate,
    Gate,
    Scan,
    anchor_offsets,
    widen,
)
from memory_ledger.commands.secrets.validators import (
    camel_word,
    names_no_secret,
    password_like,
    value_is_reference,
)

__all__ = [
    "ENTROPY_GATE",
    "KEYWORD_ANCHORED",
    "KEYWORD_ANCHORS",
    "PLUGIN_GATES",
    "entropy_candidates",
    "keyword_candidates",
    "plugin_candidates",
]

# The library's regex plugins, each with a gate that is a necessary condition of all its
# patterns (a literal they contain, or the 20-character token run their values need).
_REGEX_PLUGINS: Final[tuple[tuple[RegexBasedDetector, Gate], ...]] = (
    (ArtifactoryDetector(), Gate(("AKC", "AP"))),
    (AWSKeyDetector(), Gate(long_run=True)),
    (AzureStorageKeyDetector(), Gate(("AccountKey=",))),
    (BasicAuthDetector(), Gate(("://",), also=("@",))),
    (CloudantDetector(), Gate(long_run=True, folded=("cl",))),
    (DiscordBotTokenDetector(), Gate(long_run=True)),
    (GitHubTokenDetector(), Gate(long_run=True)),
    (GitLabTokenDetector(), Gate(long_run=True)),
    (IbmCloudIamDetector(), Gate(long_run=True, folded=("key", "pwd", "pass", "token"))),
    (IbmCosHmacDetector(), Gate(long_run=True, folded=("secret",))),
    (JwtTokenDetector(), Gate(("eyJ",))),
    (MailchimpDetector(), Gate(("-us",), long_run=True)),
    (NpmDetector(), Gate(("_authToken",))),
    (OpenAIDetector(), Gate(("sk-",))),
    (PrivateKeyDetector(), Gate(("PRIVATE KEY", "PuTTY-User-Key-File"))),
    (PypiTokenDetector(), Gate(("pypi-",))),
    (SendGridDetector(), Gate(("SG.",))),
    (SlackDetector(), Gate(folded=("xox", "hooks.slack.com"))),
    (SoftlayerDetector(), Gate(long_run=True, folded=("sl", "softlayer"))),
    (SquareOAuthDetector(), Gate(("sq0csp-",))),
    (StripeDetector(), Gate(("k_live_",))),
    (TelegramBotTokenDetector(), Gate((":",), long_run=True)),
    (TwilioKeyDetector(), Gate(long_run=True)),
)
PLUGIN_GATES: Final[tuple[Gate, ...]] = tuple(gate for _, gate in _REGEX_PLUGINS)
"""The gate of every regex plugin (``secrets.prefilter`` unites them)."""

ENTROPY_GATE: Final = Gate(("'", '"'), long_run=True)
"""The entropy detector's gate: a quoted token of more than 22 characters needs a quote
and a long token run."""

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


def plugin_candidates(scan: Scan) -> Iterator[Candidate]:
    """Spans of the library's regex plugins (``findall`` semantics, with positions), each
    widened to the whole token."""
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
                    yield (*widen(text, start, end), kind, 0)


# ---------------------------------------------------------------------------------------
# Keyword assignments: the library's patterns (``password = x``, ``api_key: "x"``, ...)
# applied to each line holding a keyword, with positions from the match groups.

_KEYWORD_PATTERNS: Final = tuple(
    {**CONFIG_DENYLIST_REGEX_TO_GROUP, **QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP}.items()
)
_KEYWORD_HINT: Final = RulePattern("|".join(DENYLIST))
_KEYWORD_HINT_LINE: Final = re.compile("|".join(DENYLIST), re.IGNORECASE)
# A credential must be a whole part of the key name (parts split at _ - . and camelCase).
_KEYWORD_PART: Final = re.compile(r"(?:^|_)(?:" + "|".join(DENYLIST) + r")s?(?:_|$)")
_KEY_NAME_CHARS: Final = LEFT_TOKEN | frozenset(".ñÑ")
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


def _keyword_line(line: str, offset: int) -> Iterator[Candidate]:
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
            if value_is_reference(value) or is_indirect_reference(match.group(0)):
                continue
            if key.group(0).lower() == "pwd" and value[:1] in "/~":
                continue  # PWD=/home/me is a working directory, not a password
            quoted = start > 0 and line[start - 1] in "'\"`"
            operator = line[key.end() : start]
            if not quoted and (
                "==" in operator or "!=" in operator or names_no_secret(value.split()[0])
            ):
                continue  # a comparison, a type annotation, null, or a dotted reference
            if plain and not quoted and "=" not in operator:
                # "my secret: be kind" and "my secret: 2 eggs" are English; "password:
                # hunter2" is a credential.
                token = value.split()[0].rstrip(".,;!?")
                if len(token) < 4 or not (password_like(token) or camel_word(token)):
                    continue
                end = start + len(token)
            kind = "password" if _PASSWORD_HINT.search(key.group(0)) else "secret_keyword"
            yield (offset + start, offset + end, kind, 1)


# Every keyword of the library's DENYLIST holds one of these literals (checked at import;
# without it the hint regex scans the whole text): ``str.find`` locates the candidate lines
# much faster than a regex alternation, and the hint regex then runs on those lines only.
KEYWORD_ANCHORS: Final = ("key", "pass", "pwd", "secret", "contrase")
KEYWORD_ANCHORED: Final = all(any(a in word for a in KEYWORD_ANCHORS) for word in DENYLIST)


def _lines_at(text: str, offsets: Iterable[int]) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of ``text`` holding one of the ascending ``offsets``, once
    (``end`` excludes the newline)."""
    seen: set[int] = set()
    for offset in offsets:
        line_start = text.rfind("\n", 0, offset) + 1
        if line_start in seen:
            continue
        seen.add(line_start)
        line_end = text.find("\n", offset)
        yield line_start, len(text) if line_end < 0 else line_end


def _keyword_hint_offsets(scan: Scan) -> Iterator[int]:
    """Offsets of the keyword hits (at least one on each line holding a DENYLIST word)."""
    folded = scan.lower
    if folded is None or not KEYWORD_ANCHORED:
        yield from (hint.start() for hint in _KEYWORD_HINT.finditer(scan))
        return
    for line_start, line_end in _lines_at(folded, anchor_offsets(folded, KEYWORD_ANCHORS)):
        hint = _KEYWORD_HINT.plain.search(folded, line_start, line_end)
        if hint is not None:
            yield hint.start()


def keyword_candidates(scan: Scan) -> Iterator[Candidate]:
    """Keyword assignments found by the library's patterns, line by line (see the module
    doc for what is skipped)."""
    text = scan.text
    for line_start, line_end in _lines_at(text, _keyword_hint_offsets(scan)):
        if line_end > line_start and text[line_end - 1] == "\r":
            line_end -= 1
        yield from _keyword_line(text[line_start:line_end], line_start)


def entropy_candidates(scan: Scan) -> Iterator[Candidate]:
    """Quoted base64-looking tokens above the library's entropy limit."""
    if not ENTROPY_GATE(scan):
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
