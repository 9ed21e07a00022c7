"""The project's own detection rules, as data: the shapes ``detect-secrets`` misses.

One :class:`~memory_ledger.commands.secrets.rule.Rule` per entry of :data:`RULES`: its id,
the kind it reports, its pattern, the context words that gate it, the group of its value
and its validator (or, for four rules, the finder of ``secrets.finders``). Token prefixes
are matched in any case: an upper-cased copy (``SK-PROJ-...``, ``GHP_...``) is still the
same secret. :func:`~memory_ledger.commands.secrets.detect.rule_candidates` applies the
table; the library's own plugins are applied by ``secrets.plugins``.
"""

from __future__ import annotations

import re
from typing import Final

from memory_ledger.commands.secrets.finders import (
    bare_aws_secrets,
    credential_assignments,
    pem_blocks,
    prose_logins,
)
from memory_ledger.commands.secrets.rule import Check, Rule, RulePattern
from memory_ledger.commands.secrets.scan import Scan
from memory_ledger.commands.secrets.validators import (
    OPEN_QUOTE,
    camel_word,
    letters_and_digits,
    names_no_secret,
    openai_case_ok,
    passphrase_words,
    password_like,
    short_password_value,
    two_classes,
    upper_and_lower,
    value_is_reference,
)

__all__ = ["RULES"]


# Validators: (value, match, scan) -> whether the value is the secret. ---------------------


def _mixed(value: str, match: re.Match[str], scan: Scan) -> bool:
    return letters_and_digits(value)


def _openai(value: str, match: re.Match[str], scan: Scan) -> bool:
    return letters_and_digits(value) and openai_case_ok(value)


def _schemed_or_mixed(value: str, match: re.Match[str], scan: Scan) -> bool:
    return bool(match.group(1)) or letters_and_digits(value)


def _password_value(value: str, match: re.Match[str], scan: Scan) -> bool:
    return (password_like(value) or camel_word(value)) and not value_is_reference(value)


def _userinfo_password(value: str, match: re.Match[str], scan: Scan) -> bool:
    return not value_is_reference(value)


def _cli_password(value: str, match: re.Match[str], scan: Scan) -> bool:
    return len(value) >= 4 and not value_is_reference(value) and not names_no_secret(value)


def _glued_password(value: str, match: re.Match[str], scan: Scan) -> bool:
    return _cli_password(value, match, scan) and (
        password_like(value) or letters_and_digits(value) or camel_word(value)
    )


def _passphrase(value: str, match: re.Match[str], scan: Scan) -> bool:
    return passphrase_words(value)


def _short_password(value: str, match: re.Match[str], scan: Scan) -> bool:
    if not value or any(c in "()[]{}" for c in value) or value_is_reference(value):
        return False
    keyword = scan.text[match.start(1) : match.end(1)].lower()
    return not names_no_secret(value) and short_password_value(keyword, value)


def _mlt_body(value: str, match: re.Match[str], scan: Scan) -> bool:
    return upper_and_lower(value[len("mlt_") :])


def _npm_body(value: str, match: re.Match[str], scan: Scan) -> bool:
    return two_classes(value[len("npm_") :])


def _hf_body(value: str, match: re.Match[str], scan: Scan) -> bool:
    return two_classes(value[len("hf_") :])


_KEY_IS_PREFIX: Final = re.compile(
    r"(?:^|[^a-z])(?:api|access|secret|auth|refresh|session|client|private)[ _-]?$"
)


def _api_key_value(value: str, match: re.Match[str], scan: Scan) -> bool:
    folded = scan.lower if scan.lower is not None else scan.text.lower()
    if not _KEY_IS_PREFIX.search(folded, max(0, match.start() - 12), match.start()):
        return False
    return len(value) >= 12 and letters_and_digits(value)


_VALUE: Final = r"[" + OPEN_QUOTE + r"]?([!#-&(-_a-~\u00a1-\u02af\u0370-\u052f]+)"
"""An optionally quoted value: printable ASCII, Latin, Greek and Cyrillic letters, no quote
(so a value ends at a quote, a space, or CJK text such as a trailing ``です``)."""


def _token(
    id: str,
    kind: str,
    words: tuple[str, ...],
    pattern: str,
    about: str,
    *,
    example: str,
    check: Check = _mixed,
    ci: bool = True,
) -> Rule:
    """A token shape with a distinctive prefix (in any case unless ``ci`` is False; one of
    ``words``), widened to the whole token, whose value passes ``check`` (by default: it
    holds letters and digits)."""
    return Rule(
        id=id,
        kind=kind,
        pattern=RulePattern(pattern, ci=ci),
        about=about,
        example=example,
        words=words,
        long_run=True,
        widen=True,
        rank=0,
        check=check,
    )


RULES: Final[tuple[Rule, ...]] = (
    Rule(
        id="pem_private_key",
        kind="private_key",
        pattern=RulePattern(r"-{4,5} ?BEGIN ([A-Z0-9 ]*?)PRIVATE KEY( BLOCK)? ?-{4,5}", ci=False),
        context=re.compile(r"-{4,5} ?END [A-Z0-9 ]*?PRIVATE KEY(?: BLOCK)? ?-{4,5}"),
        about="PEM private-key blocks, multi-line: the library flags only the BEGIN line. A "
        "block with no END (a transcript cut short) is redacted to the end of the text.",
        example="-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7v\n"
        "-----END RSA PRIVATE KEY-----",
        words=("PRIVATE KEY",),
        case_sensitive=True,
        rank=0,
        finder=pem_blocks,
    ),
    Rule(
        id="putty_private_key",
        kind="private_key",
        pattern=RulePattern(
            r"PuTTY-User-Key-File-\d+:.*?(?:Private-MAC:[^\n]*|\Z)", ci=False, flags=re.DOTALL
        ),
        about="PuTTY key files, from the header to the Private-MAC line (library: header "
        "line only).",
        example="PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-MAC: 8f3a",
        words=("PuTTY-User-Key-File-",),
        case_sensitive=True,
        rank=0,
    ),
    _token(
        "openai_key",
        "openai_token",
        ("sk-",),
        r"sk-(?<![\w-]sk-)(?!ant-)(?:proj-|svcacct-|admin-)?[a-z0-9_-]{20,}",
        "OpenAI project/service/admin and legacy keys without the T3BlbkFJ marker that the "
        "library's OpenAI plugin requires. Not in lower case, the prefix must name a key type "
        "or carry a 40-character body, as legacy keys do ('SK-' alone is also a product-code "
        "prefix).",
        example="my key is sk-Zq8vR2mK9pL4xWa7Tb3Nc6Yd",
        check=_openai,
    ),
    _token(
        "openai_typed_key",
        "openai_token",
        ("sk-proj-", "sk-svcacct-", "sk-admin-"),
        r"(?<![a-z0-9])sk-(?:proj|svcacct|admin)-[a-z0-9_-]{20,}",
        "The distinctive OpenAI project/service/admin forms also after a hyphen, as inside an "
        "identifier ('s-sk-proj-...': a session id built from a key).",
        example="session s-sk-proj-Zq8vR2mK9pL4xWa7Tb3Nc6Yd here",
        check=_openai,
    ),
    _token(
        "anthropic_key",
        "anthropic_api_key",
        ("sk-ant-",),
        r"(?<![a-z0-9])sk-ant-[a-z0-9_-]{20,}",
        "Anthropic keys.",
        example="key sk-ant-api03-Zq8vR2mK9pL4xWa7Tb3Nc6Yd",
    ),
    _token(
        "github_classic_token",
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        r"(?<![a-z0-9])gh[pousr]_[a-z0-9_]{36}",
        "GitHub classic tokens in any case (the library's plugin: lower-case prefixes only).",
        example="GHP_A1B2C3D4E5F6G7H8I9J0K1L2M3N4O5P6Q7R8",
    ),
    _token(
        "github_fine_grained_token",
        "github_token",
        ("github_pat_",),
        r"github_pat_[a-z0-9_]{22,}",
        "GitHub fine-grained personal access tokens (library: classic gh*_ tokens only).",
        example="github_pat_11ABCDEFG0Zq8vR2mK9pL4xW",
    ),
    _token(
        "gitlab_token",
        "gitlab_token",
        ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-", "gloas-"),
        r"(?<![a-z0-9])(?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|gloas)-[a-z0-9_-]{20,}",
        "GitLab tokens in any case (the library's plugin: lower-case prefixes only).",
        example="GLPAT-Zq8vR2mK9pL4xWa7Tb3N",
    ),
    _token(
        "stripe_key",
        "stripe_access_key",
        ("k_live_", "k_test_"),
        r"[sr]k_(?:live|test)_[a-z0-9]{16,}",
        "Stripe live and test keys in any case (library: lower-case sk_live_/rk_live_ only).",
        example="SK_TEST_4eC39HqLyjWDarjtT1zdp7dc",
    ),
    _token(
        "stripe_webhook_secret",
        "stripe_access_key",
        ("whsec_",),
        r"whsec_[a-z0-9]{24,}",
        "Stripe webhook secrets.",
        example="whsec_Zq8vR2mK9pL4xWa7Tb3Nc6Yd",
    ),
    _token(
        "google_api_key",
        "google_api_key",
        ("aiza",),
        r"aiza[0-9a-z_-]{35}",
        "Google Cloud / Maps / Gemini API keys.",
        example="AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    ),
    _token(
        "pypi_token",
        "pypi_token",
        ("pypi-",),
        r"pypi-(?:ageichlwas5vcmc|agendgvzdc5wexbplm9yzw)[a-z0-9_-]{70,}",
        "PyPI tokens with their prefix in another case.",
        example="PYPI-AgEIcHlwaS5vcmc" + "A1b2C3d4E5" * 8,
    ),
    _token(
        "sendgrid_key",
        "sendgrid_api_key",
        ("sg.",),
        r"(?<![a-z0-9])sg\.[a-z0-9_-]{22}\.[a-z0-9_-]{43}",
        "SendGrid keys with their prefix in another case.",
        example="sg.Zq8vR2mK9pL4xWa7Tb3Nc6.Zq8vR2mK9pL4xWa7Tb3Nc6Yd1Zq8vR2mK9pL4xWa7Tb3",
    ),
    Rule(
        id="aws_secret_assignment",
        kind="aws_secret_access_key",
        pattern=RulePattern(
            r"aws.{0,20}?(?:secret|key).{0,20}?[=:]\s*[\"']?([a-z0-9/+]{40})(?![a-z0-9/+])"
        ),
        about="AWS secret access keys in unquoted assignments (the library requires quotes).",
        example="aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        words=("aws",),
        group=1,
        rank=0,
    ),
    Rule(
        id="authorization_header",
        kind="authorization_header",
        pattern=RulePattern(
            r"authorization[\"']?\s*[:=]\s*[\"']?(?:(bearer|basic|token|bot|digest|apikey)\s+)?"
            r"([a-z0-9\-._~+/=:]{8,})"
        ),
        about="Authorization header values: after a scheme word, or holding letters and digits; "
        'as a header line or a JSON/dict entry (\'"Authorization": "Basic ..."\').',
        example="Authorization: Basic dXNlcjpwYXNz",
        words=("authorization",),
        group=2,
        widen=True,
        check=_schemed_or_mixed,
    ),
    Rule(
        id="url_userinfo",
        kind="basic_auth_credentials",
        pattern=RulePattern(r"[a-z][a-z0-9+.\-]*://[^\s/?#@\[\]:]*:([^\s/?#@\[\]]+)@"),
        about="A password in a URL's user information ('scheme://user:password@host', RFC "
        "3986 section 3.2.1), any character the RFC allows there (sub-delimiters such as "
        "'!$&*+=' and ':' too) and an empty user ('redis://:password@host'); the library's "
        "plugin stops at sub-delimiters and needs a user. A reference ('${DB_PASSWORD}', "
        "'<password>', '****') holds no secret.",
        example="redis://:Zq8vR2mK9pL4xW@cache.internal:6379/0",
        words=("://",),
        group=1,
        check=_userinfo_password,
    ),
    Rule(
        id="curl_user",
        kind="basic_auth_credentials",
        pattern=RulePattern(
            r"\bcurl\b[^\n]*?\s(?:-u\s*|--user[\s=]\s*)[\"']?[^\s:\"']*:([^\s\"']+)"
        ),
        about="curl's HTTP credentials on its command line ('curl -u user:password', "
        "'--user user:password'; curl(1)): the part after the first ':'.",
        example="curl -u admin:Zq8vR2mK9pL4xW https://api.example.com",
        words=("curl",),
        group=1,
        check=_cli_password,
    ),
    Rule(
        id="mysql_password_flag",
        kind="password",
        pattern=RulePattern(
            r"\b(?i:mysql(?:dump|admin|sh|import|check)?|mariadb(?:-dump|-admin)?)\b[^\n]*?"
            r"\s-p([^\s\"'-][^\s\"']*)",
            ci=False,
        ),
        about="A password glued to the MySQL/MariaDB clients' '-p' flag ('mysql -uroot "
        "-pPASSWORD'; mysql(1): no space, or the client prompts); '-P3306' is the port (case "
        "kept); the value must hold a digit or a symbol, or be a camel-case word ('mysql "
        "-party' is a word).",
        example="mysql -uroot -pZq8vR2mK9pL4xW shop",
        words=("mysql", "mariadb"),
        group=1,
        check=_glued_password,
    ),
    Rule(
        id="bearer_token",
        kind="bearer_token",
        pattern=RulePattern(r"bearer\s+([a-z0-9\-._~+/]{16,}=*)"),
        about="'Bearer <token>' anywhere: a token of 16+ characters with letters and digits.",
        example="send it with bearer Zq8vR2mK9pL4xWa7Tb3N",
        words=("bearer",),
        group=1,
        widen=True,
        check=_mixed,
    ),
    Rule(
        id="password_is",
        kind="password",
        pattern=RulePattern(
            r"pass(?:word|wd|phrase|code)\s+(?:is|was)\s*:?\s*[\"'`]?([^\s\"'`]{4,})"
        ),
        about="Prose: 'my password is hunter2'. The value must hold a digit or a symbol, or "
        "be a camel-case word of 8+ letters ('my password is CorrectHorseBatteryStaple'); "
        "'my password is secret' is read as English.",
        example="my password is hunter2!",
        words=("pass",),
        group=1,
        trim=True,
        check=_password_value,
    ),
    Rule(
        id="password_phrase",
        kind="password",
        pattern=RulePattern(
            r"pass(?<![a-z0-9_]pass)(?:word|phrase|code|wd|[ -]phrase)s?"  # literal first: fast
            r"(?:\s*:|\s+(?:is|was)\b\s*:?)\s*[\"'`\u2018\u201c]?"
            r"([a-z][^\n.,;:!?\"'`\u2019\u201d()\[\]{}<>]{0,158}[a-z])"
        ),
        about="Prose passphrases: a password label ('password', 'passphrase', 'passcode', "
        "'passwd') then ':', 'is' or 'was' and the rest of the clause as a phrase of 3 to "
        "10 words of letters ('My password: correct horse battery staple', xkcd 936; "
        "'my passphrase is purple-monkey-dishwasher'). No word may be an English function "
        "word or one that describes passwords, so 'The password policy requires 12 "
        "characters', 'I forgot my password yesterday', 'the password is twelve characters "
        "long' and 'The password: it's on the fridge' stay silent. A bare 'pass' is not a "
        "label here ('boarding pass: economy class seat').",
        example="My password: correct horse battery staple",
        words=("pass",),
        group=1,
        check=_passphrase,
    ),
    Rule(
        id="short_password",
        kind="password",
        pattern=RulePattern(
            r"(?<![a-z0-9_])(pass|pin)(?:\s*[:=]|\s+(?:is|was)\b:?)\s*[\"'`]?([^\s\"'`]+)"
        ),
        about="Short password keywords in prose: 'pass'/'pin' then 'is', ':' or '=' and one "
        "token ('wifi pass is CorrectHorseBatteryStaple', 'my PIN is 4821'). A pass value "
        "must look like a password (a symbol, letters with digits but not a measure such as "
        "2500m, 6+ digits, or a camel-case word of 8+ letters); a PIN is 4-12 digits. 'the "
        "pass is open' stays silent.",
        example="the wifi pass is Zq8vR2mK",
        words=("pass", "pin"),
        group=2,
        trim=True,
        check=_short_password,
    ),
    Rule(
        id="prose_login",
        kind="password",
        pattern=RulePattern(
            r"(?<![a-z])(?:log(?:s|ged|ging)?\s*(?:in|on)(?:to)?"
            r"|sign(?:s|ed|ing)?\s*(?:in|on)(?:to)?"
            r"|ssh(?:es|ed|'d|ing)?\s+(?:in)?to|connect(?:s|ed|ing)?\s+(?:in)?to"
            r"|authenticat(?:e|es|ed|ing))(?![a-z])[^\n]{0,40}?(?<![a-z])as\s+(?:the\s+)?"
            r"(?:user(?:name)?\s+)?[\"'`]?[\w.@\\-]+[\"'`]?\s+(?:with|using)\s+"
            r"(?:(?:(?:the|a|an|her|his|their|my|our|your|its)\s+)?"
            r"(pass(?:word|phrase|wd|code)?|pw|pwd)(?:\s+(?:of|is))?\s*[:=]?\s*)?"
            r"[\"'`]?([^\s\"'`]+)"
        ),
        about="Prose logins: a login verb ('logs into', 'logged in to', 'signs in to', 'ssh "
        "to', 'connects to', 'authenticates'), then within 40 characters 'as <user> "
        "with|using [password] <value>' ('logs into the NAS as admin with Zq8!vR2#mK9pL4xW'). "
        "The value must look like a password; without a password keyword a camel-case word "
        "does not count ('connects to the VPN as guest using WireGuard'); 'logs into the NAS "
        "as admin with her laptop' stays silent.",
        example="she logs into the NAS as admin with Zq8!vR2#mK9pL4xW",
        words=(" as ",),
        anchors=("log", "sign", "ssh", "connect", "authenticat"),
        finder=prose_logins,
    ),
    _token(
        "mcp_bearer_token",
        "mcp_bearer_token",
        ("mlt_",),
        r"(?<![A-Za-z0-9_-])mlt_[A-Za-z0-9_-]{43}",
        "The engine's own MCP bearer token (mlt_ + secrets.token_urlsafe(32): 43 "
        "URL-safe characters, memory_ledger.replay.mcp.tokens.new_token) with upper and lower "
        "case in its body, so a snake_case identifier after mlt_ is not one (a random body "
        "lacks either with odds near 1e-10; digits are missing from about one token in a "
        "thousand, so they are not required).",
        example="mlt_Zq8vR2mK9pL4xWa7Tb3Nc6Yd1Zq8vR2mK9pL4xWa7Tb",
        check=_mlt_body,
        ci=False,
    ),
    _token(
        "npm_token",
        "npm_token",
        ("npm_",),
        r"(?<![A-Za-z0-9_])(?i:npm_)[A-Za-z0-9]{36}",
        "npm tokens (npm_ + 36 alphanumerics mixing two of lower case, upper case and "
        "digits; the library's npm plugin fires only inside .npmrc).",
        example="npm_Zq8vR2mK9pL4xWa7Tb3Nc6Yd1Zq8vR2mK9pL",
        check=_npm_body,
        ci=False,
    ),
    _token(
        "huggingface_token",
        "huggingface_token",
        ("hf_",),
        r"(?<![A-Za-z0-9_])(?i:hf_)[A-Za-z0-9]{34,}",
        "Hugging Face tokens (hf_ + 34+ letters and digits mixing two of lower case, "
        "upper case and digits; no library plugin).",
        example="hf_Zq8vR2mK9pL4xWa7Tb3Nc6Yd1Zq8vR2mK9",
        check=_hf_body,
        ci=False,
    ),
    Rule(
        id="aws_secret_bare",
        kind="aws_secret_access_key",
        pattern=RulePattern(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])", ci=False),
        context=re.compile(
            r"(?<![a-z])(?:aws|amazon)(?![a-z])|(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])",
            re.IGNORECASE,
        ),
        about="An AWS secret access key with no assignment: a whole run of exactly 40 "
        "characters of the base64 alphabet (no base64 character or '=' on either side), with "
        "at most four '/' and upper and lower case, not inside a URL and not a base64/hex "
        "sequence. Anywhere in the text it must also hold a digit, not be made of words "
        "(not handleUserAuthenticationRequestV2Handler; a path's segments are words too) and "
        "not be base64 of printable text (30 bytes of a sentence encode to exactly 40 "
        "characters; a random key decodes to printable text with odds near 1e-13); such a "
        "shape-only find ranks with the entropy detector, so a keyword or header detector "
        "around it names the span. With aws, amazon or an AKIA/ASIA key id within 120 "
        "characters, a digit or '/'/'+' and no leading '/' suffice. Lower-case hex (a git "
        "SHA-1), upper-case base32 and identifiers stay silent.",
        example="the key wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8vR2mK9p works",
        long_run=True,
        rank=0,
        finder=bare_aws_secrets,
    ),
    Rule(
        id="api_key_is",
        kind="api_key",
        pattern=RulePattern(r"(?:key|token|secret)s?\s*(?:[:=]|is\b|was\b)\s*[\"'`]?([^\s\"'`]+)"),
        about="Prose: 'API key: abc123def456ghi', 'my access token is ...' (after api, access, "
        "secret, auth, refresh, session, client or private): letters and digits, 12+.",
        example="my API key is abc123def456ghi",
        words=("key", "token", "secret"),
        group=1,
        trim=True,
        check=_api_key_value,
    ),
    Rule(
        id="credential_assignment",
        kind="secret_keyword",
        pattern=RulePattern(
            r"(token|secret|credential|passphrase|passcode|passwd|password|pwd"
            r"|passwort|kennwort|contraseña|contrasena|mot[ _-]de[ _-]passe|senha|wachtwoord"
            r"|lösenord|losenord|passord|adgangskode|hasło|haslo|пароль|şifre|sifre"
            r"|パスワード|密码|密碼|비밀번호)s?[\]'\"]{0,2}"
            r"(?:\s*(:=|=>|=(?!=)|:(?!:))|\s+(?:is|was|ist|lautet|es|est|é|era|war)\b:?"
            r"|\s*(?:は|는|은|是|为|為):?)\s*" + _VALUE
        ),
        about="Keyword assignments the library misses or gates on English: 'token: <value>', "
        "'auth_token = <value>', 'session token is <value>', 'passphrase: <value>', and "
        "password assignments in other languages (German, Spanish, French, Portuguese, "
        "Dutch, Scandinavian, Polish, Russian, Turkish, Japanese, Chinese, Korean) with the "
        "local 'is' (ist, es, est, é, は, ...); full-width colons arrive as ':' (the scan "
        "reads NFKC text). The keyword is the last part of the key name (auth_token, "
        "accessToken; not tokenizer). A token, secret or credential value must look random; "
        "a password value (kind password) may instead be any one-token value of 4+ "
        "characters after '=' (or quoted after ':'), or one with a digit or a symbol after "
        "':' or 'is'. 'my secret: I love jazz', 'the secret is to start early' and 'token of "
        "appreciation' stay silent.",
        example="the token: Zq8vR2mK9pL4xWa7Tb3N",
        anchors=(
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
            # non-ASCII anchors, tried only in non-ASCII text
            "lösenord",
            "hasło",
            "пароль",
            "şifre",
            "パスワード",
            "密码",
            "密碼",
            "비밀번호",
        ),
        finder=credential_assignments,
    ),
)
"""The project's rules, in the order they are applied (the order does not change what is
found: candidates are sorted and merged)."""
