"""Password hashing, token shapes and the login rate limiter (no database)."""

from __future__ import annotations

import hashlib
import re

import pytest

from kandev.auth import passwords, tokens
from kandev.auth.rate_limit import LoginRateLimiter
from kandev.clock import ManualClock
from kandev.errors import RateLimited


def test_password_hash_is_argon2id_with_original_parameters() -> None:
    hashed = passwords.hash_password("correct horse")
    assert hashed.startswith("$argon2id$v=19$m=65536,t=1,p=4$")
    assert "correct horse" not in hashed
    assert passwords.verify_password(hashed, "correct horse")
    assert not passwords.verify_password(hashed, "wrong horse")


def test_two_hashes_of_one_password_differ_by_salt() -> None:
    assert passwords.hash_password("same-password") != passwords.hash_password("same-password")


def test_malformed_stored_hash_is_a_mismatch_not_a_crash() -> None:
    assert not passwords.verify_password("not-a-phc-string", "whatever1")
    passwords.dummy_verify("whatever1")  # must not raise


def test_session_token_is_43_urlsafe_chars() -> None:
    token = tokens.new_session_token()
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token)
    assert tokens.looks_like_session_token(token)
    assert not tokens.looks_like_session_token(token + "x")
    assert tokens.new_session_token() != token


def test_pat_shape_and_hash_covers_whole_string() -> None:
    pat = tokens.new_pat()
    assert re.fullmatch(r"kandev_pat_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", pat.raw)
    assert pat.prefix == pat.raw[len("kandev_pat_") :][:8]
    assert pat.sha256 == hashlib.sha256(pat.raw.encode()).hexdigest()
    assert pat.raw not in repr(pat)


def test_parse_pat_accepts_only_the_minted_shape() -> None:
    pat = tokens.new_pat()
    parsed = tokens.parse_pat(pat.raw)
    assert parsed is not None and parsed.prefix == pat.prefix
    bad = [
        "",
        pat.raw + "a",
        pat.raw[:-1],
        pat.raw.replace("kandev_pat_", "kandev_pot_"),
        "kandev_pat_XYZW1234_" + pat.raw[-43:],
        "kandev_pat_" + pat.prefix + "-" + pat.raw[-43:],
        "x" * 10_000,
    ]
    for raw in bad:
        assert tokens.parse_pat(raw) is None, raw


def test_generic_prefixed_token_for_other_kinds() -> None:
    agent = tokens.new_prefixed_token("agent")
    assert re.fullmatch(r"kandev_agent_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", agent.raw)
    assert tokens.parse_prefixed_token(agent.raw, "agent") == agent
    assert tokens.parse_pat(agent.raw) is None
    assert tokens.parse_prefixed_token(tokens.new_pat().raw, "agent") is None


def test_rate_limiter_fixed_window_and_reset() -> None:
    clock = ManualClock()
    limiter = LoginRateLimiter(clock, limit=3, window_seconds=60)
    key = limiter.key("1.2.3.4", "a@b.c")
    for _ in range(3):
        limiter.hit(key)
    with pytest.raises(RateLimited):
        limiter.hit(key)
    limiter.hit(limiter.key("5.6.7.8", "a@b.c"))  # another client has its own budget
    clock.advance(seconds=59)
    with pytest.raises(RateLimited):
        limiter.hit(key)
    clock.advance(seconds=1)
    limiter.hit(key)  # a new window
    limiter.hit(key)
    limiter.reset(key)
    for _ in range(3):
        limiter.hit(key)


def test_rate_limiter_forgets_stale_windows() -> None:
    clock = ManualClock()
    limiter = LoginRateLimiter(clock, limit=1, window_seconds=10)
    for i in range(50):
        limiter.hit(f"k{i}")
    clock.advance(seconds=11)
    limiter.hit("fresh")
    assert list(limiter._windows) == ["fresh"]
