"""Secret detection and redaction (commands.secrets).

Test secrets are built at run time from parts (random characters around each vendor's
prefix), so no real-looking live key is committed.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memory_ledger.commands.secrets import (
    Redaction,
    SecretSpan,
    contains_secret,
    field_secret,
    find_secrets,
    redact,
)

_RNG = random.Random(20240517)
ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits


def rand(chars: str, n: int, rng: random.Random = _RNG) -> str:
    """``n`` random characters of ``chars``; a letter and a digit when ``chars`` has both."""
    mixed = any(c.isalpha() for c in chars) and any(c.isdigit() for c in chars)
    while True:
        value = "".join(rng.choice(chars) for _ in range(n))
        if not mixed or (any(c.isalpha() for c in value) and any(c.isdigit() for c in value)):
            return value


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def make_jwt() -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps({"sub": rand(string.digits, 10), "name": "Test"}).encode())
    signature = b64url(bytes(_RNG.randrange(256) for _ in range(32)))
    return f"{header}.{payload}.{signature}"


def make_pem(label: str = "RSA PRIVATE KEY", lines: int = 5) -> tuple[str, list[str]]:
    body = [rand(ALNUM + "+/", 64) for _ in range(lines)]
    dashes = "-" * 5
    block = "\n".join([f"{dashes}BEGIN {label}{dashes}", *body, f"{dashes}END {label}{dashes}"])
    return block, body


OPENAI_KEY = "sk-" + "proj-" + rand(ALNUM + "_-", 48) + "T3Blbk" + "FJ" + rand(ALNUM, 48)
OPENAI_KEY_NO_MARKER = "sk-" + "proj-" + rand(ALNUM, 64)
AWS_KEY_ID = "AK" + "IA" + rand(UPPER_DIGITS, 16)
AWS_SECRET = rand(ALNUM + "/+", 40)
GITHUB_TOKEN = "gh" + "p_" + rand(ALNUM, 36)
GITHUB_FINE = "github" + "_pat_" + rand(ALNUM + "_", 82)
SLACK_TOKEN = "xo" + "xb-" + rand(string.digits, 12) + "-" + rand(string.digits, 13) + "-"
SLACK_TOKEN += rand(string.ascii_lowercase + string.digits, 24)
STRIPE_LONG = "sk" + "_live_" + rand(ALNUM, 99)
GOOGLE_KEY = "AI" + "za" + rand(ALNUM + "_-", 35)
JWT = make_jwt()
BEARER = rand(ALNUM + "-._~", 40)


# (text, the secret inside it, the expected kind)
POSITIVE: list[tuple[str, str, str]] = [
    (f"my key is {OPENAI_KEY} ok", OPENAI_KEY, "openai_token"),
    (f"OPENAI_API_KEY={OPENAI_KEY_NO_MARKER}", OPENAI_KEY_NO_MARKER, "openai_token"),
    (f"aws_access_key_id = {AWS_KEY_ID}", AWS_KEY_ID, "aws_access_key"),
    (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws_secret_access_key"),
    (f'aws_secret_access_key: "{AWS_SECRET}"', AWS_SECRET, "aws_access_key"),
    (f"export GH_TOKEN={GITHUB_TOKEN}", GITHUB_TOKEN, "github_token"),
    (f"use {GITHUB_FINE} for the repo", GITHUB_FINE, "github_token"),
    (f"slack bot token {SLACK_TOKEN}", SLACK_TOKEN, "slack_token"),
    (f"charge with {STRIPE_LONG}.", STRIPE_LONG, "stripe_access_key"),
    (f"maps key {GOOGLE_KEY}", GOOGLE_KEY, "google_api_key"),
    (f"the session is {JWT} today", JWT, "json_web_token"),
    ("password = hunter2", "hunter2", "password"),
    ('PASSWORD: "s3cr3t!"', "s3cr3t!", "password"),
    ('api_key="abc123def456ghi789"', "abc123def456ghi789", "api_key"),
    ('db_password: "swordfish"', "swordfish", "password"),
    ("dbPassword = swordfish", "swordfish", "password"),
    ("db_password = Str0ng!Pass", "Str0ng!Pass", "password"),
    (f"Authorization: Bearer {BEARER}", BEARER, "authorization_header"),
    (f"curl -H 'Authorization: Bearer {JWT}'", JWT, "json_web_token"),
    (f"send it with bearer {BEARER}", BEARER, "bearer_token"),
    ("my password is p@ssw0rd.", "p@ssw0rd", "password"),
    ("Here is my API key: abc123def456ghi789.", "abc123def456ghi789", "api_key"),
    ("https://admin:Pa55w0rdX@db.example.com/x", "Pa55w0rdX", "basic_auth_credentials"),
]


@pytest.mark.parametrize(("text", "secret", "kind"), POSITIVE, ids=[p[2] for p in POSITIVE])
def test_fires_on_secret_shapes(text: str, secret: str, kind: str) -> None:
    spans = find_secrets(text)
    start = text.index(secret)
    covering = [s for s in spans if s.start <= start and start + len(secret) <= s.end]
    assert covering, (text, spans)
    assert covering[0].kind == kind
    assert contains_secret(text)
    redacted = redact(text)
    assert secret not in redacted.text
    assert f"[REDACTED:{kind}]" in redacted.text
    assert redacted.count >= 1 and kind in redacted.kinds


def test_multiline_private_key_block_is_one_span() -> None:
    block, body = make_pem()
    text = f"here is the deploy key:\n{block}\nthanks!"
    spans = find_secrets(text)
    assert spans == [SecretSpan(text.index(block), text.index(block) + len(block), "private_key")]
    result = redact(text)
    assert result.text == "here is the deploy key:\n[REDACTED:private_key]\nthanks!"
    assert all(line not in result.text for line in body)


@pytest.mark.parametrize(
    "label", ["PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK"]
)
def test_other_private_key_blocks(label: str) -> None:
    block, body = make_pem(label)
    result = redact(f"key:\n{block}\n")
    assert result.text == "key:\n[REDACTED:private_key]\n"


def test_private_key_cut_short_is_redacted_to_the_end() -> None:
    block, body = make_pem()
    truncated = block[: block.index(body[2]) + 10]
    result = redact("user: my key\n" + truncated)
    assert result.text == "user: my key\n[REDACTED:private_key]"


def test_private_key_in_json_string() -> None:
    block, body = make_pem("PRIVATE KEY")
    text = json.dumps({"type": "service_account", "private_key": block + "\n"})
    result = redact(text)
    assert all(line not in result.text for line in body)
    assert "service_account" in result.text


NEGATIVE = [
    "I lost my house key",
    "the key to success",
    "the system prompt",
    "password reset emails are annoying",
    "I forgot my password again",
    "token of appreciation",
    "My secret: I practice every day.",
    "Here's the secret: be kind to people",
    "my secretary: Jane, she is great",
    "The password: it's on the fridge",
    "my password is strong and long",
    "my password is 8 characters",
    "the bearer of bad news",
    "Authorization: approved by my manager",
    "I passed the exam with passion",
    "Key takeaways: sleep more, worry less",
    "Caroline: I'm a keynote speaker and love the monkey bars!",
    "PWD=/home/melanie/projects",
    "password = get_password()",
    "api_key = ${API_KEY}",
    'token: "<your token here>"',
    "api_key: {api_key}",
    'commit "9fceb02d0ae598e95dc970b74767f19372d61af8" fixed it',
    'memory_id "0b5a3c5e-2f4e-4a3f-9d6a-1f2e3d4c5b6a"',
    "She scored 100000000 points and called 555-123-4567.",
    "The API key is in the vault.",
    "my access token is expired",
    "Visit https://example.com/path/to/a/page?id=123 for more.",
    "ID: 7f3e9a1c, order number 1234567890",
    "sk-learn is not a thing, but scikit-learn is",
    # code about secrets, not secrets
    "api_key: str | None = None",
    "password: Optional[str] = None",
    "api_key=settings.API_KEY",
    "if password == confirm_password:",
    "password = None",
    "PASSWORD=$DB_PASSWORD",
    "password: ${{ secrets.DB_PASSWORD }}",
    "password: {{ vault_db_password }}",
    "password_hash = bcrypt.hashpw(pw, salt)",
    "def get_password(self) -> str:",
    # keyword phrasing in prose, and code about tokens (not tokens)
    "the secret is to start early",
    "a secret: I love jazz",
    "My secret: 2 eggs in the batter",
    "My secret: #blessed and happy",
    "the secret is 24/7 support",
    "session token is expired",
    "the token is 42",
    "credential: see the docs",
    "tokenizer: bert-base-uncased-v2",
    "token = get_token()",
    "token: str",
    "token = self.token",
    "token=<your-api-token-here>",
    "token: ${GITHUB_TOKEN}",
    "token = /etc/app/token.txt",
    "secret = os.environ['SECRET']",
    "password = os.environ.get('DB_PASSWORD')",
    # other languages: the keyword without a credential-looking value
    "Kennwort vergessen? Kein Problem.",
    "Das Passwort ist sicher",
    "La contraseña es segura",
    "le mot de passe est incorrect",
    "a senha é fraca",
    "resenha = 12345678",
    "パスワードを忘れました",
    # an upper-case "SK-" product code is not a key
    "SK-HYNIX-2024-Q3-EARNINGS",
]


@pytest.mark.parametrize("text", NEGATIVE)
def test_silent_on_english(text: str) -> None:
    assert find_secrets(text) == []
    assert redact(text) == Redaction(text=text, count=0, kinds=())


def _locomo(path: Path) -> dict[str, list[str]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    observations: list[str] = []
    turns: list[str] = []
    for sample in data:
        for session in sample["observation"].values():
            for facts in session.values():
                observations.extend(fact[0] for fact in facts)
        for value in sample["conversation"].values():
            if isinstance(value, list):
                turns.extend(f"{t['speaker']}: {t.get('text', '')}" for t in value)
    return {"observations": observations, "turns": turns}


def test_no_detection_in_locomo_observations(locomo_file: Path) -> None:
    observations = _locomo(locomo_file)["observations"]
    assert len(observations) > 1000
    fired = [(text, find_secrets(text)) for text in observations if find_secrets(text)]
    assert fired == []


def test_no_detection_in_locomo_dialogue_turns(locomo_file: Path) -> None:
    turns = _locomo(locomo_file)["turns"]
    fired = [(text, find_secrets(text)) for text in turns if find_secrets(text)]
    assert fired == []
    assert find_secrets("\n".join(turns)) == []


def test_spans_are_sorted_disjoint_and_in_original_offsets() -> None:
    text = (
        f'a {AWS_KEY_ID} b password = hunter2\nc {GITHUB_TOKEN} d {JWT}\napi_key = "{OPENAI_KEY}"\n'
    )
    spans = find_secrets(text)
    assert [s.kind for s in spans] == [
        "aws_access_key",
        "password",
        "github_token",
        "json_web_token",
        "openai_token",
    ]
    for left, right in zip(spans, spans[1:], strict=False):
        assert left.end <= right.start
    assert text[spans[0].start : spans[0].end] == AWS_KEY_ID
    assert text[spans[1].start : spans[1].end] == "hunter2"
    assert text[spans[4].start : spans[4].end] == OPENAI_KEY
    result = redact(text)
    assert result.count == 5
    assert result.kinds == (
        "aws_access_key",
        "github_token",
        "json_web_token",
        "openai_token",
        "password",
    )
    assert result.text == (
        "a [REDACTED:aws_access_key] b password = [REDACTED:password]\n"
        "c [REDACTED:github_token] d [REDACTED:json_web_token]\n"
        'api_key = "[REDACTED:openai_token]"\n'
    )


def test_markers_are_not_secrets() -> None:
    text = 'password = [REDACTED:password] and api_key: "[REDACTED:api_key]"'
    assert find_secrets(text) == []
    assert redact(text).count == 0


# --- keyword assignments: token / secret / credential / passphrase -------------------------

TOKEN_VALUE = rand(ALNUM, 40)
SYMBOL_PASSWORD = rand(string.ascii_lowercase, 4) + "#" + rand(string.digits, 3) + "Q"


@pytest.mark.parametrize(
    ("template", "kind"),
    [
        ("token: {}", "secret_keyword"),
        ("token = {}", "secret_keyword"),
        ("TOKEN={}", "secret_keyword"),
        ('token: "{}"', "secret_keyword"),
        ("here is the token: {}.", "secret_keyword"),
        ("credential = {}", "secret_keyword"),
        ("credentials: {}", "secret_keyword"),
        ("secret is {}", "secret_keyword"),
        ("auth_token: {}", "api_key"),
        ("session token is {}", "api_key"),
        ("accessToken={}", "api_key"),
        ("passphrase: {}", "password"),
        ("passwd={}", "password"),
    ],
)
def test_keyword_with_random_value(template: str, kind: str) -> None:
    text = template.format(TOKEN_VALUE)
    start = text.index(TOKEN_VALUE)
    assert find_secrets(text) == [SecretSpan(start, start + len(TOKEN_VALUE), kind)]
    assert redact(text).text == template.format(f"[REDACTED:{kind}]")


@pytest.mark.parametrize(
    "template", ["pwd: {}", "passphrase is {}", "token: {}", "my secret: {}", "credential={}"]
)
def test_keyword_with_short_symbol_value(template: str) -> None:
    text = template.format(SYMBOL_PASSWORD)
    result = redact(text)
    assert SYMBOL_PASSWORD not in result.text
    assert result.count == 1


def test_passphrase_assignment_covers_the_rest_of_the_line() -> None:
    words = " ".join(rand(string.ascii_lowercase, 6) for _ in range(4))
    result = redact(f"passphrase = {words}\nnext line")
    assert result.text == "passphrase = [REDACTED:password]\nnext line"


def test_short_or_plain_values_after_token_are_prose() -> None:
    assert find_secrets("token: " + rand(ALNUM, 12)) == []  # too short to be a token
    assert find_secrets("token: " + rand(string.ascii_letters, 30)) == []  # a word, no digit
    assert find_secrets("token: " + string.ascii_lowercase + string.digits) == []  # a sequence


# --- token prefixes in any case ------------------------------------------------------------

OPENAI_BODY = rand(ALNUM, 48)


@pytest.mark.parametrize(
    ("secret", "kind"),
    [
        ("SK-PROJ-" + OPENAI_BODY.upper(), "openai_token"),
        ("Sk-Proj-" + OPENAI_BODY, "openai_token"),
        ("SK-" + OPENAI_BODY.upper(), "openai_token"),
        ("SK-ANT-API03-" + OPENAI_BODY.upper(), "anthropic_api_key"),
        (GITHUB_TOKEN.upper(), "github_token"),
        ("Ghp_" + GITHUB_TOKEN[4:], "github_token"),
        (GITHUB_FINE.upper(), "github_token"),
        ("GL" + "PAT-" + rand(UPPER_DIGITS, 20), "gitlab_token"),
        (STRIPE_LONG.upper(), "stripe_access_key"),
        ("SK" + "_TEST_" + rand(UPPER_DIGITS, 24), "stripe_access_key"),
        (GOOGLE_KEY.upper(), "google_api_key"),
    ],
)
def test_prefixes_match_in_any_case(secret: str, kind: str) -> None:
    text = f"the key is {secret} ok"
    start = text.index(secret)
    assert find_secrets(text) == [SecretSpan(start, start + len(secret), kind)]
    assert redact(text).text == f"the key is [REDACTED:{kind}] ok"


# --- compatibility forms (NFKC) --------------------------------------------------------------


def fullwidth(ascii_text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in ascii_text)


@pytest.mark.parametrize(
    ("secret", "kind"),
    [
        (fullwidth("sk") + "-proj-" + OPENAI_BODY, "openai_token"),
        (fullwidth("sk-proj-" + OPENAI_BODY), "openai_token"),
        (fullwidth(GITHUB_TOKEN), "github_token"),
        (fullwidth(AWS_KEY_ID), "aws_access_key"),
    ],
)
def test_fullwidth_secrets_map_back_to_original_offsets(secret: str, kind: str) -> None:
    text = f"「メモ」 copy {secret} ok…"
    start = text.index(secret)
    assert find_secrets(text) == [SecretSpan(start, start + len(secret), kind)]
    assert redact(text).text == f"「メモ」 copy [REDACTED:{kind}] ok…"


def test_fullwidth_password_assignment() -> None:
    value = fullwidth("hunter2x")
    text = f"メモ password＝{value}"
    start = text.index(value)
    assert find_secrets(text) == [SecretSpan(start, start + len(value), "password")]


def test_span_over_a_non_one_to_one_character_covers_the_whole_token() -> None:
    # The ligature U+FB01 is two characters in NFKC form; the span widens to the token.
    value = rand(ALNUM, 10) + "\ufb01" + rand(ALNUM, 10)
    text = f"before token: {value} after"
    spans = find_secrets(text)
    assert len(spans) == 1
    span = spans[0]
    assert span.start <= text.index(value) and span.end >= text.index(value) + len(value)
    assert text[span.end :] == " after"
    result = redact(text)
    assert value not in result.text and "\ufb01" not in result.text
    assert result.text.startswith("before ") and result.text.endswith(" after")


def test_half_width_kana_keyword_composes() -> None:
    # ﾊﾟｽﾜｰﾄﾞ (half-width, voicing marks as separate characters) is パスワード in NFKC form.
    text = "ﾊﾟｽﾜｰﾄﾞ：hunter2x です"
    start = text.index("hunter2x")
    assert find_secrets(text) == [SecretSpan(start, start + 8, "password")]
    assert redact(text).text == "ﾊﾟｽﾜｰﾄﾞ：[REDACTED:password] です"


def test_composition_across_starters_keeps_exact_spans_elsewhere() -> None:
    # U+0B47 U+0B3E (two starters) compose to U+0B4B: the map falls back to whole words.
    text = "\u0b47\u0b3e note token: " + TOKEN_VALUE
    start = text.index(TOKEN_VALUE)
    assert find_secrets(text) == [SecretSpan(start, start + len(TOKEN_VALUE), "secret_keyword")]


def test_normalized_non_ascii_text_is_unchanged() -> None:
    text = "Caroline: ¡Qué día! I went to the café — it was lovely 😊"
    assert find_secrets(text) == []
    assert find_secrets("Ｃａｒｏｌｉｎｅ： ｈｅｌｌｏ ｔｈｅｒｅ") == []


# --- password assignments in other languages -------------------------------------------------

FOREIGN_PASSWORD = rand(string.ascii_lowercase, 6) + rand(string.digits, 2)


@pytest.mark.parametrize(
    "template",
    [
        "passwort = {}",
        "Passwort: {}",
        "Das WLAN-Passwort ist {}.",
        "kennwort={}",
        "contraseña: {}",
        "Mi contraseña es {}",
        "contrasena = {}",
        "mot de passe = {}",
        "Le mot de passe est {}",
        "mot_de_passe: {}",
        "senha = {}",
        "A senha é {}",
        "wachtwoord: {}",
        "lösenord: {}",
        "hasło: {}",
        "пароль: {}",
        "şifre: {}",
        "パスワード：{}",
        "パスワードは{}です",
        "我的密码是{}。",
        "密碼：{}",
        "비밀번호: {}",
    ],
)
def test_password_assignments_in_other_languages(template: str) -> None:
    text = template.format(FOREIGN_PASSWORD)
    start = text.index(FOREIGN_PASSWORD)
    assert find_secrets(text) == [SecretSpan(start, start + len(FOREIGN_PASSWORD), "password")]
    assert redact(text).text == template.format("[REDACTED:password]")


# --- properties ----------------------------------------------------------------------------

FRAGMENTS = [
    "password",
    "Password",
    "api_key",
    "secret",
    "token",
    "key",
    "Authorization: Bearer ",
    "bearer ",
    " = ",
    ": ",
    "=",
    ":",
    '"',
    "'",
    "\n",
    " ",
    "is ",
    "[REDACTED:password]",
    "[REDACTED:",
    "AKIA",
    "sk-",
    "sk-proj-",
    "ghp_",
    "xoxb-",
    "eyJ",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "aws_secret_access_key",
    "://u:",
    "@",
    AWS_KEY_ID,
    GITHUB_TOKEN,
    SLACK_TOKEN,
    JWT,
    OPENAI_KEY,
    STRIPE_LONG,
    "hunter2",
    "logs into the NAS as admin with ",
    "ssh to the box as root using ",
    " as ",
    "with password ",
    "Zq8!vR2#mK9pL4xW",
    "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY",
    "I lost my house key.",
    "the key to success",
]

texts = st.lists(
    st.one_of(
        st.sampled_from(FRAGMENTS),
        st.text(alphabet=ALNUM + " _-./+=:'\"\n*[]", max_size=24),
    ),
    max_size=14,
).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_redaction_leaves_nothing_detectable(text: str) -> None:
    spans = find_secrets(text)
    for left, right in zip(spans, spans[1:], strict=False):
        assert left.end <= right.start
    assert all(0 <= s.start < s.end <= len(text) for s in spans)

    result = redact(text)
    assert find_secrets(result.text) == []
    again = redact(result.text)
    assert again.count == 0 and again.text == result.text
    if not spans:
        assert result == Redaction(text=text, count=0, kinds=())
    else:
        assert result.count >= len(spans)
        assert set(result.kinds) >= {s.kind for s in spans}


PASSPHRASE_SHAPE = re.compile(
    r"pass(?:word|wd|phrase|code)s?\s+(?:is|was)\s+[a-z]+(?:[\s_-]+[a-z]+){2}", re.IGNORECASE
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["password", "secret", "key", "token", "is", "was", "Password"]),
            # Capitalized or upper-case words: a camel-case word of 8+ letters after a
            # password keyword is a password ("CorrectHorseBatteryStaple"), not prose.
            st.text(alphabet=string.ascii_lowercase + " ,.!?'\n", max_size=20).map(str.capitalize),
            st.text(alphabet=string.ascii_uppercase + " ,.!?'\n", max_size=20),
        ),
        max_size=20,
    ).map(" ".join)
)
def test_plain_prose_is_returned_unchanged(text: str) -> None:
    # Three words of letters after "password is" are a passphrase (rule password_phrase:
    # "my password is correct horse battery staple"), not prose.
    assume(PASSPHRASE_SHAPE.search(text) is None)
    assert find_secrets(text) == []
    assert redact(text) == Redaction(text=text, count=0, kinds=())


NFKC_FRAGMENTS = [
    fullwidth("sk-proj-"),
    fullwidth("sk") + "-proj-",
    fullwidth("token: "),
    "パスワード：",
    "ﾊﾟｽﾜｰﾄﾞ：",
    "\ufb01",
    "e\u0301",
    "…",
    "①",
    "\u3000",
    "ｈｕｎｔｅｒ２",
    fullwidth(GITHUB_TOKEN),
    fullwidth("[REDACTED:password]"),
    OPENAI_BODY,
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(st.sampled_from(FRAGMENTS + NFKC_FRAGMENTS), st.text(max_size=12)),
        max_size=12,
    ).map("".join)
)
def test_redaction_of_unnormalized_text_leaves_nothing_detectable(text: str) -> None:
    spans = find_secrets(text)
    for left, right in zip(spans, spans[1:], strict=False):
        assert left.end <= right.start
    assert all(0 <= s.start < s.end <= len(text) for s in spans)
    result = redact(text)
    assert find_secrets(result.text) == []
    assert redact(result.text).text == result.text


# --- shapes without a keyword, zero-width splits, prose passwords ---------------------------

MLT_TOKEN = "ml" + "t_" + b64url(bytes(_RNG.randrange(256) for _ in range(32)))
NPM_TOKEN = "np" + "m_" + rand(ALNUM, 36)
HF_TOKEN = "h" + "f_" + rand(string.ascii_letters, 34)
AWS_DOC_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"  # AWS documentation example


def test_own_mcp_token_has_the_shape_new_token_makes() -> None:
    from memory_ledger.replay.mcp import new_token

    for _ in range(2000):
        token = new_token()
        assert find_secrets(token) == [SecretSpan(0, len(token), "mcp_bearer_token")]
    assert len(MLT_TOKEN) == 4 + 43


@pytest.mark.parametrize("offset", [0, 1, 4])
def test_a_bearer_token_whose_body_holds_a_google_key_shape_stays_a_bearer_token(
    offset: int,
) -> None:
    # A random token_urlsafe body holds "AIza" and 35 more token characters about once in
    # 20,000 tokens; both shapes then widen to the whole token, and the one whose prefix
    # starts it names the span (this made the 2,000-token test above fail now and then).
    body = "Qx8"[:offset] + "AIza" + "Sy" + "bC3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
    body = (body + "uVwXyZ1234")[:43]
    token = "mlt_" + body
    assert find_secrets(token) == [SecretSpan(0, len(token), "mcp_bearer_token")]
    assert find_secrets(f"use {token} now") == [SecretSpan(4, 4 + len(token), "mcp_bearer_token")]
    key = "AIza" + body[offset + 4 : offset + 39]
    assert find_secrets(f"maps {key}") == [SecretSpan(5, 5 + len(key), "google_api_key")]


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        (f"connect with {MLT_TOKEN} please", MLT_TOKEN, "mcp_bearer_token"),
        (f"{MLT_TOKEN}", MLT_TOKEN, "mcp_bearer_token"),
        (f"publish using {NPM_TOKEN}.", NPM_TOKEN, "npm_token"),
        (f"my hub login {HF_TOKEN}", HF_TOKEN, "huggingface_token"),
        (f"{AWS_DOC_SECRET} is the AWS secret", AWS_DOC_SECRET, "aws_secret_access_key"),
        (f"{AWS_KEY_ID} {AWS_DOC_SECRET}", AWS_DOC_SECRET, "aws_secret_access_key"),
        (f"aws_secret_access_key = {AWS_DOC_SECRET}", AWS_DOC_SECRET, "aws_secret_access_key"),
        (f"amazon creds: {AWS_SECRET}", AWS_SECRET, "aws_secret_access_key"),
        ("wifi pass is CorrectHorseBatteryStaple", "CorrectHorseBatteryStaple", "password"),
        ("my password is CorrectHorseBatteryStaple.", "CorrectHorseBatteryStaple", "password"),
        ("the wifi pass: hunter22", "hunter22", "password"),
        ("pass = Tr0ub4dor&3", "Tr0ub4dor&3", "password"),
        ("my PIN is 4821", "4821", "password"),
        ("bank pin: 908172", "908172", "password"),
        ("pwd: CorrectHorseBattery", "CorrectHorseBattery", "password"),
    ],
)
def test_shapes_without_a_keyword_and_prose_passwords(text: str, secret: str, kind: str) -> None:
    start = text.index(secret)
    assert SecretSpan(start, start + len(secret), kind) in find_secrets(text)
    assert secret not in redact(text).text


@pytest.mark.parametrize(
    "text",
    [
        "mlt_some_long_python_identifier_name_here_and_more",  # snake_case, not a token
        "npm_" + "a" * 36,
        "hf_" + "transformers_pipeline_loader_class_x",
        "aws docs live at /usr/share/doc/AwsCli2/examples/PutObjectX1",
        # "pass" and "pin" in English
        "the pass is open",
        "The pass is 2500m high and the road is closed",
        "the pass is I-70 in winter",
        "He made a pass: a long one",
        "I need a boarding pass: AB1234",
        "pin: the red one",
        "the pin is 3 inches",
        "Pin is broken",
        "bypass is 12345678",
        "spin is 45000rpm",
        # one word after "password": read as English (decided, see the module docstring)
        "my password is secret",
        "my password is Password",
        "my password is SECRET",
        "my password is complicated",
    ],
)
def test_prose_and_lookalikes_stay_silent(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize("joiner", ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"])
@pytest.mark.parametrize("secret", [OPENAI_KEY_NO_MARKER, GITHUB_TOKEN, MLT_TOKEN, NPM_TOKEN])
def test_keys_split_by_zero_width_characters(joiner: str, secret: str) -> None:
    split = secret[:6] + joiner + secret[6:20] + joiner + joiner + secret[20:]
    text = f"here: {split} ok"
    start = text.index(split)
    spans = find_secrets(text)
    assert [(s.start, s.end) for s in spans] == [(start, start + len(split))]
    redacted = redact(text).text
    assert redacted.startswith("here: [REDACTED:") and redacted.endswith("] ok")
    assert secret[20:] not in redacted and secret[6:20] not in redacted


def test_zero_width_characters_around_a_key_and_in_prose() -> None:
    text = "\ufeff" + GITHUB_TOKEN + "\u200d and Alice\u200b likes tea"
    assert find_secrets(text) == [SecretSpan(1, 1 + len(GITHUB_TOKEN), "github_token")]
    assert find_secrets("Alice\u200b likes\u200d tea\ufeff") == []


# --- bare AWS secret access keys (no AWS word near) -----------------------------------------


def aws_like_secret(rng: random.Random) -> str:
    """40 base64 characters with upper case, lower case and a digit, as AWS issues them."""
    while True:
        value = rand(ALNUM + "/+", 40, rng)
        if any(c.isupper() for c in value) and any(c.islower() for c in value):
            if any(c.isdigit() for c in value) and value.count("/") <= 4:
                return value


BARE_AWS = aws_like_secret(random.Random(7))


@pytest.mark.parametrize(
    "template",
    [
        "checksum {} of the build",
        "{}",
        "here it is: {}.",
        "use ({}) for the upload",
        'the value "{}" goes in the vault',
        "line one\n{}\nline two",
    ],
)
def test_bare_aws_secret_key_anywhere(template: str) -> None:
    for secret in (BARE_AWS, AWS_DOC_SECRET):
        text = template.format(secret)
        start = text.index(secret)
        assert SecretSpan(start, start + len(secret), "aws_secret_access_key") in find_secrets(text)
        assert secret not in redact(text).text


def test_random_aws_shaped_keys_are_found_without_context() -> None:
    rng = random.Random(20261202)
    keys = [aws_like_secret(rng) for _ in range(1000)]
    missed = [key for key in keys if not contains_secret(f"note {key} end")]
    assert missed == []


def test_a_keyword_names_a_bare_aws_shaped_token() -> None:
    text = f"Authorization: Bearer {BARE_AWS}"
    assert [span.kind for span in find_secrets(text)] == ["authorization_header"]


def test_base64_of_prose_is_not_an_aws_key() -> None:
    sentences = [
        "Caroline: I went to the LGBTQ support group yesterday.",
        "Melanie: That's awesome, I'm so proud of you!",
        "I painted a sunrise by the lake last weekend, it was calm.",
        "We're thinking of adopting a dog from the shelter soon.",
    ]
    for sentence in sentences:
        encoded = base64.b64encode(sentence.encode()[:30]).decode()
        assert len(encoded) == 40
        assert find_secrets(f"payload {encoded} ok") == []


def test_base64_of_locomo_turns_is_not_an_aws_key(locomo_file: Path) -> None:
    turns = [t for t in _locomo(locomo_file)["turns"] if len(t.encode()) >= 30]
    assert len(turns) > 1000
    encoded = [base64.b64encode(t.encode()[:30]).decode() for t in turns]
    assert [e for e in encoded if find_secrets(e)] == []


@pytest.mark.parametrize(
    "text",
    [
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed it",  # git SHA-1
        "digest 9FCEB02D0AE598E95DC970B74767F19372D61AF8",
        "memory 0b5a3c5e-2f4e-4a3f-9d6a-1f2e3d4c5b6a and 1f2e3d4c-5b6a-4a3f-9d6a-0b5a3c5e2f4e",
        "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQGEZDGNBV is base32",
        "SOME_CONSTANT_IDENTIFIER_NAME_FOR_CONFIG_X",
        "call handleUserAuthenticationRequestV2Handler now",
        "test_handleUserAuthenticationRequestV2Handler passed",
        "see https://example.com/aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7d for it",
        "open /usr/share/doc/AwsCli2/examples/PutObjectX1 please",
        "path src/Main/Java/Com/Example/Service2Impl/Factory",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn",
        "snake_case_identifier_with_many_words_and_2_digits",
        "Caroline went to the support group and felt really accepted there.",
    ],
)
def test_bare_aws_lookalikes_stay_silent(text: str) -> None:
    assert find_secrets(text) == []


# --- prose logins ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("logs into the NAS as admin with Zq8!vR2#mK9pL4xW", "Zq8!vR2#mK9pL4xW"),
        ("ssh to the box as root using hunter2!x", "hunter2!x"),
        ("signs in to the router as admin with password Zq8!vR2", "Zq8!vR2"),
        ('She logged in to the portal as "jane" using the password: S3cure#Pass.', "S3cure#Pass"),
        ("ssh into prod as deploy with password CorrectHorseBattery", "CorrectHorseBattery"),
        ("Authenticates as svc-backup using Tr0ub4dor&3", "Tr0ub4dor&3"),
        ("then he connected to the db as postgres with pg4dmin2024 and ran it", "pg4dmin2024"),
        ("Logged on to the laptop as guest with passcode 908172", "908172"),
        # a character whose lower case is longer ("İ" -> "i̇"): the case-insensitive path
        ("İstanbul trip: logs into the NAS as admin with Zq8!vR2#mK9pL4xW", "Zq8!vR2#mK9pL4xW"),
    ],
)
def test_prose_login_passwords(text: str, secret: str) -> None:
    start = text.index(secret)
    assert SecretSpan(start, start + len(secret), "password") in find_secrets(text)
    assert secret not in redact(text).text


@pytest.mark.parametrize(
    "text",
    [
        "logs into the NAS as admin with her laptop",
        "connects to the office as usual with a smile",
        "connects to the VPN as guest using WireGuard",
        "logs in as root with sudo",
        "I logged in as a guest with my phone",
        "signed in as Melanie using Google",
        "she connects to people as easily as with friends",
        "the blog is as good as with 2 authors",
    ],
)
def test_login_phrases_without_a_password_stay_silent(text: str) -> None:
    assert find_secrets(text) == []


# --- whole structured fields -------------------------------------------------------------------

FIELD_SECRETS: list[tuple[str, str | None]] = [
    ("Zq8!vR2#mK9pL4xW", None),
    ("  Zq8!vR2#mK9pL4xW  ", None),
    ('"Zq8!vR2#mK9pL4xW"', None),
    ("Zq8!vR2#mK9p\u200bL4xW", None),
    (BARE_AWS, None),
    (AWS_DOC_SECRET, None),
    (rand(ALNUM, 24, random.Random(3)), None),
    (rand(string.ascii_lowercase + string.digits, 32, random.Random(4)), None),
    (GITHUB_TOKEN, None),
    (f"token: {GITHUB_TOKEN}", None),
    ("password = hunter2", None),
    ("hunter2", "password"),
    ("Lisbon", "db password"),
    ("hunter22", "dbPassword"),
    ("hunter22", "DB_PASSWORD"),
    ("hunter22", "wifi password"),
    ("hunter22", "password for the NAS"),
    ("hunter22", "Passwort"),
    ("hunter22", "contraseña"),
    ("hunter22", "パスワード"),
    ('"hunter22"', "wifi pass"),
    ("4821", "pin"),
    ("4821", "PIN code"),
    ("abc123def456", "api key"),
    ("abc123def456", "API_KEY"),
    ("Zq8!vR2", "access key"),
    ("S3cret!", "secret"),
    ("tok_9f8e7d6c5b4a", "token"),
    ("correcthorse", "passphrase"),
    ("admin:hunter2", "credentials"),
]


@pytest.mark.parametrize(("text", "label"), FIELD_SECRETS)
def test_field_secret_fires(text: str, label: str | None) -> None:
    assert field_secret(text, label=label)


ORDINARY_FIELDS = [
    "Lisbon",
    "2025-03-01",
    "2025-03-01T10:00:00Z",
    "blue",
    "iPhone 15 Pro",
    "iPhone-15-Pro-Max",
    "ACME-42",
    "user",
    "admin",
    "project-x",
    "v1.2.3",
    "v1.2.3-beta.4+build.567",
    "https://example.com/a",
    "https://example.com/path/to/Report2024Final?id=42&x=AbC123",
    "/home/alice/Projects/Report2024",
    "snake_case_name",
    "CamelCaseName",
    "ProjectPhoenixRelease2025Q3",
    "build-2024-03-01-rc1",
    "0b5a3c5e-2f4e-4a3f-9d6a-1f2e3d4c5b6a",
    "9fceb02d0ae598e95dc970b74767f19372d61af8",
    "alice.smith@example.com",
    "Alice.Smith2@example.com",
    "@JaneDoe1987",
    "#TravelGoals2024",
    "hunter",
    "likes hiking with her dog",
    "",
    "   ",
    "42",
    "3.14",
]
PLAIN_LABELS = [None, "city", "favorite sport", "name", "tag", "start date", "phone model"]


@pytest.mark.parametrize("label", PLAIN_LABELS)
@pytest.mark.parametrize("text", ORDINARY_FIELDS)
def test_field_secret_silent_on_ordinary_values(text: str, label: str | None) -> None:
    assert not field_secret(text, label=label)


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("hunter", "favorite sport"),
        ("reset last week", "password"),
        ("forgotten", "wifi password"),
        ("unknown", "password"),
        ("${DB_PASSWORD}", "password"),
        ("<token>", "api key"),
        ("****", "pin"),
        ("None", "api key"),
        ("str", "password"),
        ("abc", "password"),
        ("https://vault.example.com/db", "db password"),
        ("blue", "house key"),
        ("C major", "key"),
        ("cinnamon", "secret ingredient"),
        ("12 chars", "password policy"),
        ("1500", "token count"),
        ("Bitwarden", "password manager"),
        ("Bitwarden", "passwordManager"),
        ("my dog's name", "password hint"),
        ("AB1234", "boarding pass"),
        ("red", "pin"),
        ("2500m", "pass"),
        ("alice2024", "login"),
    ],
)
def test_field_secret_silent_on_labels_and_values_that_name_no_secret(
    text: str, label: str
) -> None:
    assert not field_secret(text, label=label)


def test_field_secret_silent_on_locomo_words(locomo_file: Path) -> None:
    words = {word for turn in _locomo(locomo_file)["turns"] for word in turn.split()}
    assert len(words) > 5000
    assert sorted(word for word in words if field_secret(word)) == []


DICTIONARY_WORDS = (
    "time person year way day thing man world life hand part child eye woman place work week "
    "case point government company number group problem fact lisbon paris painting hiking "
    "camping pottery family friend support adoption counseling sunrise beach guitar violin "
    "concert book library coffee espresso marathon yoga garden dog cat horse battery staple "
    "correct password secret token key admin user hunter summer winter spring autumn"
).split()


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.sampled_from(DICTIONARY_WORDS).flatmap(
            lambda w: st.sampled_from([w, w.capitalize(), w.upper()])
        ),
        st.lists(st.sampled_from(DICTIONARY_WORDS), min_size=1, max_size=6).map(" ".join),
        st.lists(st.sampled_from(DICTIONARY_WORDS), min_size=2, max_size=4).map("_".join),
        st.lists(st.sampled_from(DICTIONARY_WORDS), min_size=2, max_size=4).map(
            lambda ws: "".join(w.capitalize() for w in ws)
        ),
        st.integers().map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(str),
        st.dates().map(lambda d: d.isoformat()),
        st.datetimes().map(lambda d: d.isoformat()),
        st.dates().map(lambda d: d.strftime("%d %B %Y")),
    ),
    st.sampled_from(PLAIN_LABELS),
)
def test_field_secret_of_words_numbers_and_dates_is_false(text: str, label: str | None) -> None:
    assert not field_secret(text, label=label)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("My password: correct horse battery staple", "correct horse battery staple"),
        ("my password is correct horse battery staple.", "correct horse battery staple"),
        ("passphrase: Purple Monkey Dishwasher Lamp", "Purple Monkey Dishwasher Lamp"),
        ("Wifi password: correct-horse-battery-staple", "correct-horse-battery-staple"),
        ('the passcode was "tangerine walrus quiet orbit"', "tangerine walrus quiet orbit"),
        (
            "My password: correct horse battery staple, don't tell anyone",
            "correct horse battery staple",
        ),
    ],
)
def test_prose_passphrases_are_found(text: str, secret: str) -> None:
    start = text.index(secret)
    assert find_secrets(text) == [SecretSpan(start, start + len(secret), "password")]
    assert secret not in redact(text).text


@pytest.mark.parametrize(
    "text",
    [
        "I forgot my password yesterday",
        "The password policy requires 12 characters",
        "the password is twelve characters long",
        "the password was changed last week",
        "my password is strong and long",
        "Password: see attached file",
        "Password requirements: upper lower digits",
        "Your password is going to expire soon",
        "the passwords are stored in the vault",
        "boarding pass: economy class seat",
        "My password: correct horse",  # two words read as prose
    ],
)
def test_sentences_about_passwords_stay_silent(text: str) -> None:
    assert find_secrets(text) == []


_URL_PASSWORD = "S3cr3t" + rand(ALNUM, 6)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # RFC 3986 userinfo: sub-delimiters in the password, and an empty user
        *(
            (f"Prod DB is postgresql://admin:{_URL_PASSWORD}{c}x@db.example.com/prod", c)
            for c in "!$*&=+'(),;:"
        ),
        (f"Cache is redis://:{_URL_PASSWORD}@redis.internal:6379/0", _URL_PASSWORD),
        (f'{{"headers": {{"Authorization": "Basic {_URL_PASSWORD}=="}}}}', _URL_PASSWORD),
        (f"export PGPASSWORD={_URL_PASSWORD}", _URL_PASSWORD),
        (f"MYSQL2PWD={_URL_PASSWORD} mysql shop", _URL_PASSWORD),
        (f"curl -u admin:{_URL_PASSWORD} https://api.example.com", _URL_PASSWORD),
        (f"curl --user=admin:{_URL_PASSWORD} https://api.example.com", _URL_PASSWORD),
        (f"mysql -uroot -p{_URL_PASSWORD} shop", _URL_PASSWORD),
        (f"mariadb-dump -h db -p{_URL_PASSWORD}!", _URL_PASSWORD),
    ],
)
def test_credentials_in_urls_and_command_lines_are_found(text: str, secret: str) -> None:
    """Shapes a newcomer's break attempt stored in clear (the library's URL plugin stops
    at RFC 3986 sub-delimiters and needs a user; libpq's ``PGPASSWORD`` glues the keyword;
    curl's ``-u`` and mysql's ``-p``; a JSON Authorization entry): found and redacted."""
    assert contains_secret(text)
    redacted = redact(text).text
    assert _URL_PASSWORD not in redacted
    assert secret not in redacted or len(secret) == 1


@pytest.mark.parametrize(
    "text",
    [
        "mysql -uroot -P3306 -h db",  # -P is the port
        "mysql -uroot -p shop",  # -p alone: the client prompts
        "I met her at the mysql -party",
        "see https://example.com/a:b@c",  # ':' after the host's path: no user information
        "git@github.com:org/repo.git",
        "ssh://git@github.com/org/repo",
        "postgresql://user:${DB_PASSWORD}@db/prod",
        "curl -u admin: https://example.com",
        "curl -u $USER:$PASS https://example.com",
        "curl -X POST https://a.example.com/c -d x:y",
        "THE COMPASS=north",
        "PWD=/home/me",
        "http://localhost:8080/x",
    ],
)
def test_url_and_command_line_lookalikes_stay_silent(text: str) -> None:
    assert find_secrets(text) == []


def test_a_url_password_with_a_symbol_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    """End to end: ``remember`` of a connection string whose password holds '!' is refused
    (``secret_detected``) and the ledger does not move; the password is in no file."""
    import memory_ledger
    from memory_ledger import Namespace

    ns = Namespace("acme", "alice", "chat")
    with memory_ledger.open(tmp_path / "store") as mem:
        head = mem.head
        with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
            mem.remember(ns, f"Prod DB is postgresql://admin:{_URL_PASSWORD}!x@db/prod")
        assert refused.value.reason_code == "secret_detected"
        assert _URL_PASSWORD not in str(refused.value)
        assert mem.head == head
    needle = _URL_PASSWORD.encode()
    files = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    assert not [p for p in files if needle in p.read_bytes()]
