"""The cost bound on htpasswd hashes: each scheme's parameters read as crypt(3)
reads them, and the file screened as NGINX reads it."""

from __future__ import annotations

import ctypes

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferryman.resources.htpasswd_cost import (
    ITOA64,
    Yescrypt,
    decode_uint32,
    hash_problem,
    screen_htpasswd,
    yescrypt_params,
)
from ferryman.resources.secret import InvalidSecret
from ferryman.resources.secret_policy import parse_htpasswd_secret


def encode_uint32(value: int, minimum: int) -> str:
    """yescrypt's encoder, the inverse the decoder is checked against."""
    value -= minimum
    start, end, chars, bits = 0, 47, 1, 0
    while value >= ((end + 1 - start) << bits):
        assert start < 63, "beyond what six characters hold"
        value -= (end + 1 - start) << bits
        start, end = end + 1, end + 1 + (62 - end) // 2
        chars, bits = chars + 1, bits + 6
    out = ITOA64[start + (value >> bits)]
    for _ in range(chars - 1):
        bits -= 6
        out += ITOA64[(value >> bits) & 0x3F]
    return out


def yescrypt_setting(y: Yescrypt) -> str:
    flavor = 0x2F if y.rw else 0
    text = encode_uint32(flavor, 0) + encode_uint32(y.n_log2, 1) + encode_uint32(y.r, 1)
    have = (y.p != 1) | (bool(y.t) << 1) | (bool(y.g) << 2)
    if have:
        text += encode_uint32(have, 1)
        text += encode_uint32(y.p, 2) if y.p != 1 else ""
        text += encode_uint32(y.t, 1) if y.t else ""
        text += encode_uint32(y.g, 1) if y.g else ""
    return text


def fixed(value: int, chars: int) -> str:
    return "".join(ITOA64[(value >> (6 * i)) & 0x3F] for i in range(chars))


def test_libxcrypts_default_yescrypt_parameters_read_as_documented() -> None:
    lib = ctypes.CDLL("libcrypt.so.1")
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    setting = lib.crypt_gensalt(b"$y$", 0, None, 0).decode()
    assert yescrypt_params(setting.split("$")[2]) == Yescrypt(12, 32)
    assert yescrypt_setting(Yescrypt(12, 32)) == "j9T"
    assert hash_problem(setting) is None
    scrypt = lib.crypt_gensalt(b"$7$", 0, None, 0).decode()
    assert hash_problem(scrypt) is None  # N=2^14 r=32 p=1: the bound itself


# Six characters hold 48 + 8*64 + 4*64**2 + 2*64**3 + 64**4 + 64**5 values.
ENCODABLE = 48 + 8 * 64 + 4 * 64**2 + 2 * 64**3 + 64**4 + 64**5


@given(st.integers(0, ENCODABLE - 1), st.integers(0, 7))
def test_yescrypt_numbers_round_trip(value: int, minimum: int) -> None:
    text = encode_uint32(value + minimum, minimum)
    assert decode_uint32(text + "$", 0, minimum) == (value + minimum, len(text))


@given(
    st.builds(
        Yescrypt,
        n_log2=st.integers(1, 63),
        r=st.integers(1, 2**20),
        p=st.integers(2, 2**10) | st.just(1),
        t=st.integers(0, 2**10),
        rw=st.booleans(),
    )
)
def test_yescrypt_bound(y: Yescrypt) -> None:
    assert yescrypt_params(yescrypt_setting(y)) == y
    blocks = (1 << y.n_log2) * y.r
    units = (1 << y.n_log2) * max(y.r, 8) * y.p
    if y.rw:
        within = blocks <= 2**19 and units * (y.t + 2) <= 2**21
    else:  # classic scrypt and WORM: scrypt's bound
        within = units * (y.t + 1) <= 2**19
    for prefix in ("$y$", "$gy$", "$sm3y$"):
        problem = hash_problem(f"{prefix}{yescrypt_setting(y)}$salt$hash")
        assert (problem is None) == within, (y, problem)


def test_yescrypt_upgrades_and_roms_are_refused() -> None:
    assert hash_problem(f"$y${yescrypt_setting(Yescrypt(10, 8, g=1))}$s$h") is not None
    rom = yescrypt_setting(Yescrypt(10, 8)) + encode_uint32(8, 1) + encode_uint32(10, 1)
    assert "ROM" in (hash_problem(f"$y${rom}$s$h") or "")


@given(st.integers(1, 63), st.integers(0, 2**30 - 1), st.integers(0, 2**30 - 1))
def test_scrypt_bound(n_log2: int, r: int, p: int) -> None:
    problem = hash_problem(f"$7${ITOA64[n_log2]}{fixed(r, 5)}{fixed(p, 5)}salt$hash")
    assert (problem is None) == ((1 << n_log2) * max(r, 8) * p <= 2**19), problem


@given(st.integers(0, 99), st.sampled_from(["$2a$", "$2b$", "$2x$", "$2y$"]))
def test_bcrypt_bound(cost: int, prefix: str) -> None:
    problem = hash_problem(f"{prefix}{cost:02d}$ft4CcfyFuF0RZWFr8aedxe")
    assert (problem is None) == (cost <= 12)


@given(st.integers(0, 10**12), st.sampled_from(["$5$", "$6$", "$sm3$"]))
def test_sha_crypt_bound(rounds: int, prefix: str) -> None:
    problem = hash_problem(f"{prefix}rounds={rounds}$salt$hash")
    assert (problem is None) == (rounds <= 100_000)


def test_sha_crypt_without_rounds_is_the_default_5000() -> None:
    assert hash_problem("$6$salt$hash") is None
    assert hash_problem("$6$rounds=8000000$salt$hash") == (
        "sha-crypt rounds 8000000 are above 100,000"
    )


@pytest.mark.parametrize(
    "hash_",
    ["$6$rounds=+9$s", "$6$rounds= 9$s", "$6$rounds=$s", "$2b$$x", "$sha1$x$s", "$md5x", "_!!!!"],
)
def test_parameters_that_do_not_parse_are_refused(hash_: str) -> None:
    assert "cannot be read" in (hash_problem(hash_) or "")


@given(st.integers(0, 2**32))
def test_sha1_sunmd5_and_bsdi_bounds(rounds: int) -> None:
    assert (hash_problem(f"$sha1${rounds}$salt$") is None) == (rounds <= 300_000)
    assert (hash_problem(f"$md5,rounds={rounds}$salt$") is None) == (rounds <= 150_000)
    count = rounds % 2**24
    assert (hash_problem(f"_{fixed(count, 4)}salt") is None) == (count <= 1_000_000)


@pytest.mark.parametrize(
    "hash_",
    [
        "$1$salt$h",
        "$apr1$salt$h",
        "$3$$h",
        "{PLAIN}pw",
        "{SHA}x",
        "{SSHA}x",
        "abJnggxhB/yWI",
        "$md5$s$",
    ],
)
def test_fixed_cost_schemes_pass(hash_: str) -> None:
    assert hash_problem(hash_) is None


def test_unknown_schemes_are_refused() -> None:
    assert hash_problem("$argon2id$v=19$m=4194304,t=1,p=1$s$h") == (
        "the scheme 'argon2id' is not one ferryman can bound"
    )


def test_the_first_line_of_a_user_decides_and_a_refused_user_loses_every_line() -> None:
    content = (
        b"# comment\n"
        b"slow:$6$rounds=8000000$s$h\n"
        b"fast:{PLAIN}p\n"
        b"slow:{PLAIN}would-take-over\n"
        b"fast:$2b$31$later-lines-are-never-checked\n"
    )
    screened = screen_htpasswd(content)
    assert screened.content == (
        b"# comment\nfast:{PLAIN}p\nfast:$2b$31$later-lines-are-never-checked\n"
    )
    assert screened.refused == (
        "line 2 (user 'slow') refused: sha-crypt rounds 8000000 are above 100,000",
    )
    assert screened.usable == 1
    unchanged = b"a:{PLAIN}p\r\n#x\n\nb:$2b$12$x:comment\n"
    assert screen_htpasswd(unchanged).content == unchanged


@given(st.binary(max_size=300))
def test_screening_keeps_a_subset_of_lines(content: bytes) -> None:
    screened = screen_htpasswd(content)
    lines = content.split(b"\n")
    # Every line refused leaves no content at all (b":_", a BSDi hash for user "").
    kept = screened.content.split(b"\n") if screened.content else []
    assert all(line in lines for line in kept)
    assert (screened.content == content) == (not screened.refused)


def test_a_secret_with_no_usable_user_is_invalid() -> None:
    obj = {"type": "nginx.org/htpasswd", "stringData": {"htpasswd": "a:$2y$20$x\n"}}
    with pytest.raises(InvalidSecret, match="no usable htpasswd line"):
        parse_htpasswd_secret(obj)
    obj["stringData"] = {"htpasswd": "a:$2y$20$x\nb:{PLAIN}p\n"}
    assert parse_htpasswd_secret(obj).content == b"b:{PLAIN}p\n"
    obj["stringData"] = {"htpasswd": ""}  # empty as before: every request 401
    assert parse_htpasswd_secret(obj).content == b""


def test_classic_yescrypt_flavours_are_bound_as_scrypt() -> None:
    """Measured: flavour 0 with N=2^16 r=8 p=2 took 0.33 s, inside the RW bound."""
    heavy = Yescrypt(16, 8, p=2, rw=False)
    assert "classic flavour" in (hash_problem(f"$y${yescrypt_setting(heavy)}$s$h") or "")
    assert hash_problem(f"$y${yescrypt_setting(Yescrypt(16, 8, rw=False))}$s$h") is None
    assert hash_problem(f"$y${yescrypt_setting(Yescrypt(16, 8, p=2))}$s$h") is None
