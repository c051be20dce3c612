"""Pure parts of the loop's HTTP endpoints and backoff."""

from __future__ import annotations

import hashlib
import hmac

from reconciler.loop import Loop, LocalSource
from reconciler.loop.server import signature, verify

SECRET = b"It's a Secret to Everybody"
BODY = b"Hello, World!"


def test_github_signature_matches_the_documented_example():
    # The example in GitHub's webhook documentation.
    assert signature(SECRET, BODY) == \
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_verify_accepts_only_the_right_secret_in_each_header_style():
    good = signature(SECRET, BODY)
    assert verify(SECRET, BODY, {"x-hub-signature-256": good})
    assert not verify(SECRET, BODY + b" ", {"x-hub-signature-256": good})
    assert not verify(b"other", BODY, {"x-hub-signature-256": good})
    assert verify(SECRET, BODY, {"x-gitea-signature": hmac.new(SECRET, BODY, hashlib.sha256).hexdigest()})
    assert verify(SECRET, BODY, {"x-gitlab-token": SECRET.decode()})
    assert not verify(SECRET, BODY, {"x-gitlab-token": "nope"})
    assert not verify(SECRET, BODY, {})
    assert not verify(SECRET, BODY, {"x-hub-signature-256": "sha1=" + "0" * 40})


def test_backoff_doubles_up_to_its_cap(tmp_path):
    loop = Loop(LocalSource(tmp_path, watch=False), None, backoff=(1.0, 10.0))
    delays = []
    for failures in range(1, 7):
        loop._failures = failures
        delays.append(loop._backoff_delay())
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_legacy_github_sha1_and_bitbucket_signatures():
    sha1 = "sha1=" + hmac.new(SECRET, BODY, hashlib.sha1).hexdigest()
    sha256 = "sha256=" + hmac.new(SECRET, BODY, hashlib.sha256).hexdigest()
    assert verify(SECRET, BODY, {"x-hub-signature": sha1})           # GitHub's legacy header
    assert verify(SECRET, BODY, {"x-hub-signature": sha256})         # Bitbucket Cloud and Data Center
    assert not verify(b"other", BODY, {"x-hub-signature": sha1})
    assert not verify(SECRET, BODY + b"x", {"x-hub-signature": sha256})
    assert not verify(SECRET, BODY, {"x-hub-signature": "md5=" + hashlib.md5(BODY).hexdigest()})
    # With both headers, the SHA-256 one decides.
    assert not verify(SECRET, BODY, {"x-hub-signature-256": "sha256=" + "0" * 64, "x-hub-signature": sha1})


def test_a_port_already_taken_is_an_error_naming_it_not_an_internal_one(tmp_path):
    import socket

    import pytest

    from reconciler.errors import EXIT_ERROR, InputError
    from reconciler.loop.server import Server

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    try:
        with pytest.raises(InputError) as caught:
            Server(Loop(LocalSource(tmp_path, watch=False), None), "127.0.0.1", port)
    finally:
        held.close()
    assert f"cannot listen on 127.0.0.1:{port} (--listen): Address already in use" in caught.value.message
    assert "--listen HOST:PORT" in caught.value.hint and caught.value.exit_code == EXIT_ERROR
