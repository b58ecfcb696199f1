"""How much one password check against an htpasswd hash costs, and the bound.

The data plane checks basicAuth passwords inside the NGINX worker, with
crypt(3) (libxcrypt): a check blocks every connection of that worker until it
returns, and the hash itself says how long that is (``$6$rounds=999999999$``
takes hours). So a tenant's hash whose parameters ask for more than about one
bcrypt cost-12 check (~0.17 s here) is refused before it reaches NGINX. The
bounds and why, measured with libxcrypt on the project's 2-core machine
(docs/operations.md "Hostile input limits" has the table):

- bcrypt ``$2a$ $2b$ $2x$ $2y$``: cost <= 12 (cost 12: 0.17 s; each step doubles).
- sha-crypt ``$5$ $6$`` (and SM3's ``$sm3$``): rounds <= 100,000, 5,000 when
  absent (100,000: ``$5$`` 0.03 s, ``$6$`` 0.02 s).
- scrypt ``$7$``: N*max(r,8)*p <= 2**19, so 128*N*r <= 64 MiB (libxcrypt's
  default N=2**14, r=32, p=1 is at the bound: 0.16 s; the slowest in the
  bound measured, N=2**16 r=8: 0.17 s). r counts as at least 8 because a
  block of small r costs more (N=2**19 r=1 took 0.25 s).
- yescrypt ``$y$ $gy$ $sm3y$``: 128*N*r <= 64 MiB and N*max(r,8)*p*(t+2) <=
  2**21 (libxcrypt's default N=2**12 r=32 is 16 MiB and 0.015 s; the slowest in
  the bound measured 0.10 s); upgrades (g) and a ROM are refused. Its classic
  flavours (0: scrypt, 1: WORM) cost about twice as much per block and p runs
  sequentially: N*max(r,8)*p*(t+1) <= 2**19, scrypt's bound (N=2**16 r=8: 0.18 s;
  at the RW bound, p=2, it took 0.33 s).
- SHA1-crypt ``$sha1$``: rounds <= 300,000 (0.14 s); SunMD5 ``$md5``: rounds
  <= 150,000 (0.16 s); BSDi ``_``: count <= 1,000,000.

Every other ``$`` scheme is refused: a future libxcrypt scheme could be costly,
and crypt(3) cannot compute an unknown one anyway (NGINX would answer 500).
MD5 (``$1$``, ``$apr1$``), NT (``$3$``), DES and NGINX's own ``{PLAIN}``,
``{SHA}``, ``{SSHA}`` have a fixed small cost. A costly scheme whose
parameters do not parse is refused too: crypt(3) parses them its own way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BCRYPT_MAX_COST = 12
SHA_CRYPT_MAX_ROUNDS = 100_000
SHA_CRYPT_DEFAULT_ROUNDS = 5_000
SCRYPT_MAX_WORK = 2**19
YESCRYPT_MAX_BLOCKS = 2**19  # N*r 128-byte blocks: 64 MiB
YESCRYPT_MAX_WORK = 2**21
SHA1_CRYPT_MAX_ROUNDS = 300_000
SUNMD5_MAX_ROUNDS = 150_000
BSDI_MAX_COUNT = 1_000_000

ITOA64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_VALUE = {c: i for i, c in enumerate(ITOA64)}
_FIXED_COST = ("$1$", "$apr1$", "$3$", "{PLAIN}", "{SHA}", "{SSHA}")
_DIGITS = re.compile(r"[0-9]+")


class Unreadable(ValueError):
    """Parameters that do not parse."""


def _digits(text: str) -> int:
    if not _DIGITS.fullmatch(text):
        raise Unreadable(f"cannot read the number {text[:20]!r}")
    return int(text)


def decode_uint32(text: str, pos: int, minimum: int) -> tuple[int, int]:
    """yescrypt's variable-length number at ``pos``: (value, position after).

    The first character says how many follow: values 0-47 one character,
    then ranges of halving size for two, three... characters."""
    if pos >= len(text) or text[pos] not in _VALUE:
        raise Unreadable("a yescrypt parameter is missing")
    c = _VALUE[text[pos]]
    pos += 1
    value, start, end, chars, bits = minimum, 0, 47, 1, 0
    while c > end:
        value += (end + 1 - start) << bits
        start = end + 1
        end = start + (62 - end) // 2
        chars += 1
        bits += 6
    value += (c - start) << bits
    for _ in range(chars - 1):
        if pos >= len(text) or text[pos] not in _VALUE:
            raise Unreadable("a yescrypt parameter is cut short")
        bits -= 6
        value += _VALUE[text[pos]] << bits
        pos += 1
    if value >= 2**32:
        raise Unreadable("a yescrypt parameter is out of range")
    return value, pos


def decode_fixed(text: str, pos: int, chars: int) -> int:
    """``chars`` characters, least significant 6 bits first (scrypt's r and p, BSDi's count)."""
    if len(text) < pos + chars or any(c not in _VALUE for c in text[pos : pos + chars]):
        raise Unreadable("a parameter is cut short")
    return sum(_VALUE[text[pos + i]] << (6 * i) for i in range(chars))


@dataclass(frozen=True)
class Yescrypt:
    n_log2: int
    r: int
    p: int = 1
    t: int = 0
    g: int = 0
    rom: bool = False
    rw: bool = True  # the flavour: YESCRYPT_RW, or classic scrypt / WORM


def yescrypt_params(params: str) -> Yescrypt:
    """The field after ``$y$`` up to the salt's ``$``."""
    flavor, pos = decode_uint32(params, 0, 0)
    if flavor > 2 + (0x3FC >> 2):
        raise Unreadable("unknown yescrypt flavor")
    n_log2, pos = decode_uint32(params, pos, 1)
    r, pos = decode_uint32(params, pos, 1)
    p, t, g, rom = 1, 0, 0, False
    if pos < len(params):
        have, pos = decode_uint32(params, pos, 1)
        if have & 1:
            p, pos = decode_uint32(params, pos, 2)
        if have & 2:
            t, pos = decode_uint32(params, pos, 1)
        if have & 4:
            g, pos = decode_uint32(params, pos, 1)
        if have & 8:
            _, pos = decode_uint32(params, pos, 1)
            rom = True
    if pos != len(params) or n_log2 > 63:
        raise Unreadable("unexpected yescrypt parameters")
    return Yescrypt(n_log2, r, p, t, g, rom, flavor >= 2)


def _yescrypt(rest: str) -> str | None:
    y = yescrypt_params(rest.split("$", 1)[0])
    blocks = (1 << y.n_log2) * y.r
    units = (1 << y.n_log2) * max(y.r, 8) * y.p
    if y.g or y.rom:
        return "yescrypt upgrades (g) and ROMs are not accepted"
    if not y.rw:
        if units * (y.t + 1) > SCRYPT_MAX_WORK:
            return (
                f"yescrypt (classic flavour) N=2^{y.n_log2} r={y.r} p={y.p} t={y.t} is above "
                f"the bound (N*max(r,8)*p*(t+1) <= 2^19)"
            )
        return None
    if blocks > YESCRYPT_MAX_BLOCKS or units * (y.t + 2) > YESCRYPT_MAX_WORK:
        return (
            f"yescrypt N=2^{y.n_log2} r={y.r} p={y.p} t={y.t} is above the bound "
            f"(128*N*r <= 64 MiB, N*max(r,8)*p*(t+2) <= 2^21)"
        )
    return None


def _scrypt(rest: str) -> str | None:
    if not rest or rest[0] not in _VALUE:
        raise Unreadable("scrypt N is missing")
    n_log2 = _VALUE[rest[0]]
    r, p = decode_fixed(rest, 1, 5), decode_fixed(rest, 6, 5)
    if n_log2 < 1 or (1 << n_log2) * max(r, 8) * p > SCRYPT_MAX_WORK:
        return f"scrypt N=2^{n_log2} r={r} p={p} is above the bound (N*max(r,8)*p <= 2^19)"
    return None


def _rounds(rest: str, default: int, bound: int, name: str) -> str | None:
    rounds = default
    if rest.startswith("rounds="):
        rounds = _digits(rest[7:].split("$", 1)[0])
    if rounds > bound:
        return f"{name} rounds {rounds} are above {bound:,}"
    return None


def _bcrypt(rest: str) -> str | None:
    cost = _digits(rest[:2]) if rest[2:3] == "$" else _digits(rest.split("$", 1)[0])
    if cost > BCRYPT_MAX_COST:
        return f"bcrypt cost {cost} is above {BCRYPT_MAX_COST}"
    return None


def _sha1(rest: str) -> str | None:
    rounds = _digits(rest.split("$", 1)[0])
    if rounds > SHA1_CRYPT_MAX_ROUNDS:
        return f"SHA1-crypt rounds {rounds} are above {SHA1_CRYPT_MAX_ROUNDS:,}"
    return None


def _sunmd5(rest: str) -> str | None:
    if rest.startswith("$"):
        return None
    if not rest.startswith(",rounds="):
        raise Unreadable("unexpected SunMD5 parameters")
    rounds = _digits(re.split(r"[$,]", rest[8:], maxsplit=1)[0])
    if rounds > SUNMD5_MAX_ROUNDS:
        return f"SunMD5 rounds {rounds} are above {SUNMD5_MAX_ROUNDS:,}"
    return None


def hash_problem(hash_: str) -> str | None:
    """Why checking a password against ``hash_`` costs too much; None when it does not."""
    try:
        if hash_.startswith(_FIXED_COST):
            return None
        for prefix in ("$2a$", "$2b$", "$2x$", "$2y$"):
            if hash_.startswith(prefix):
                return _bcrypt(hash_[4:])
        if hash_.startswith(("$5$", "$6$")):
            return _rounds(hash_[3:], SHA_CRYPT_DEFAULT_ROUNDS, SHA_CRYPT_MAX_ROUNDS, "sha-crypt")
        if hash_.startswith("$sm3$"):
            return _rounds(hash_[5:], SHA_CRYPT_DEFAULT_ROUNDS, SHA_CRYPT_MAX_ROUNDS, "sm3-crypt")
        for prefix in ("$y$", "$gy$", "$sm3y$"):
            if hash_.startswith(prefix):
                return _yescrypt(hash_[len(prefix) :])
        if hash_.startswith("$7$"):
            return _scrypt(hash_[3:])
        if hash_.startswith("$sha1$"):
            return _sha1(hash_[6:])
        if hash_.startswith("$md5"):
            return _sunmd5(hash_[4:])
        if hash_.startswith("_"):
            count = decode_fixed(hash_, 1, 4)
            if count > BSDI_MAX_COUNT:
                return f"BSDi count {count} is above {BSDI_MAX_COUNT:,}"
            return None
        if hash_.startswith("$"):
            return f"the scheme {hash_.split('$', 2)[1][:20]!r} is not one ferryman can bound"
        return None  # DES and bigcrypt: fixed and small
    except Unreadable as e:
        return f"its cost cannot be read ({e})"


@dataclass(frozen=True)
class Screened:
    content: bytes  # the lines kept, byte for byte
    refused: tuple[str, ...]  # one message per refused user
    usable: int  # users left


def screen_htpasswd(content: bytes) -> Screened:
    """NGINX's reading of the file (the first line naming a user decides; ``#``
    and blank lines skipped; the hash ends at ``:`` or a line break): a user
    whose deciding hash costs too much loses every line, so no later line of
    theirs takes over and the check stays cheap (401)."""
    lines = content.split(b"\n")
    first: dict[bytes, int] = {}
    for number, line in enumerate(lines):
        if line[:1] in (b"#", b"\r") or b":" not in line:
            continue
        user = line.split(b":", 1)[0]
        first.setdefault(user, number)
    refused_users: set[bytes] = set()
    messages: list[str] = []
    for user, number in first.items():
        hash_ = re.split(rb"[\r:]", lines[number].split(b":", 1)[1], maxsplit=1)[0]
        problem = hash_problem(hash_.decode("latin-1"))
        if problem:
            refused_users.add(user)
            name = user.decode("utf-8", "replace")
            messages.append(f"line {number + 1} (user {name!r}) refused: {problem}")
    if not refused_users:
        return Screened(content, (), len(first))
    kept = [
        line
        for line in lines
        if line[:1] in (b"#", b"\r") or line.split(b":", 1)[0] not in refused_users
    ]
    return Screened(b"\n".join(kept), tuple(messages), len(first) - len(refused_users))
