"""Regular expressions checked in the dialect that runs them: PCRE2's.

Every regex a user writes (VirtualServer ``~``/``~*`` paths and match
conditions, rate-limit tier matches, ``nginx.org/path-regex`` paths, proxy
redirects, HTTPRoute ``RegularExpression`` matches) is run by PCRE2, in
NGINX's regex engine (ferryman's module) or in lua-nginx-module's ``ngx.re``.
Python's ``re`` is another dialect: it accepts ``\\u0061`` (PCRE2 refuses the
escape), so such a route was accepted and never matched; it refuses ``\\K`` or
``(*UCP)``, which PCRE2 runs. So a pattern is accepted exactly when PCRE2
compiles it, and refused with PCRE2's own message and offset.

Debian's lua-nginx-module still links the older PCRE (``libpcre.so.3``) for
``ngx.re``, so where that library is present a pattern must compile in both:
the Lua paths (the fast path without the module, the slow path) run it there.

Why ctypes over the system's ``libpcre2-8`` rather than a binding from PyPI:
the check must use the library NGINX itself links (Debian's ``libpcre2-8-0``,
a dependency of the ``nginx`` package and so present wherever ferryman's data
plane is, the container image included), so the validator and the data plane
can never disagree on a version; a binding bundles its own PCRE2 build, and
compiling is all that is needed (three functions).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

# PCRE2 refuses a pattern longer than its own limit with an error; far below
# it, anything a route can hold (4,096 characters) fits the message buffer.
_MESSAGE_BYTES = 256
# The sonames Debian ships; find_library for other systems.
_SONAMES = ("libpcre2-8.so.0", "libpcre2-8.so")
_PCRE1_SONAMES = ("libpcre.so.3", "libpcre.so.1")


class _Library:
    def __init__(self, lib: ctypes.CDLL) -> None:
        self.compile = lib.pcre2_compile_8
        self.compile.restype = ctypes.c_void_p
        self.compile.argtypes = [
            ctypes.c_char_p,  # the pattern
            ctypes.c_size_t,  # its length (it may hold NULs)
            ctypes.c_uint32,  # options: none, as NGINX and ngx.re compile without UTF
            ctypes.POINTER(ctypes.c_int),  # error code
            ctypes.POINTER(ctypes.c_size_t),  # error offset
            ctypes.c_void_p,  # compile context: the defaults
        ]
        self.free = lib.pcre2_code_free_8
        self.free.restype = None
        self.free.argtypes = [ctypes.c_void_p]
        self.message = lib.pcre2_get_error_message_8
        self.message.restype = ctypes.c_int
        self.message.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]


class _Pcre1:
    """The older PCRE's compile: its free is a variable holding a function."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.compile = lib.pcre_compile
        self.compile.restype = ctypes.c_void_p
        self.compile.argtypes = [
            ctypes.c_char_p,  # the pattern, NUL-terminated
            ctypes.c_int,  # options: none, as ngx.re's "jo"
            ctypes.POINTER(ctypes.c_char_p),  # the message
            ctypes.POINTER(ctypes.c_int),  # its offset
            ctypes.c_void_p,  # character tables: the defaults
        ]
        pointer = ctypes.c_void_p.in_dll(lib, "pcre_free").value
        if pointer is None:
            raise ValueError("pcre_free is not set")
        self.free = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(pointer)


@functools.cache
def _pcre1() -> _Pcre1 | None:
    for name in _PCRE1_SONAMES:
        try:
            return _Pcre1(ctypes.CDLL(name))
        except (OSError, AttributeError, ValueError):
            continue
    return None


@functools.cache
def _library() -> _Library:
    names = [*_SONAMES, ctypes.util.find_library("pcre2-8")]
    for name in names:
        if not name:
            continue
        try:
            return _Library(ctypes.CDLL(name))
        except OSError:
            continue
    raise RuntimeError(
        "libpcre2-8 (PCRE2, the regex library NGINX runs) was not found: install "
        "Debian's libpcre2-8-0; without it no regular expression can be checked"
    )


@functools.lru_cache(maxsize=4096)
def pcre_error(pattern: str) -> str | None:
    """Why PCRE2 refuses ``pattern``, as ``<PCRE2's message> at offset N``; None
    when it compiles. Cached: the same pattern is checked at every re-parse."""
    lib = _library()
    raw = pattern.encode("utf-8", "surrogatepass")
    if b"\0" in raw:
        return "a regular expression must not hold a NUL character"
    code = ctypes.c_int()
    offset = ctypes.c_size_t()
    compiled = lib.compile(raw, len(raw), 0, ctypes.byref(code), ctypes.byref(offset), None)
    if not compiled:
        buffer = ctypes.create_string_buffer(_MESSAGE_BYTES)
        lib.message(code.value, buffer, _MESSAGE_BYTES)
        return f"{buffer.value.decode('utf-8', 'replace')} at offset {offset.value}"
    lib.free(compiled)
    if (old := _pcre1()) is None:
        return None
    message = ctypes.c_char_p()
    at = ctypes.c_int()
    compiled = old.compile(raw, 0, ctypes.byref(message), ctypes.byref(at), None)
    if not compiled:
        text = (message.value or b"refused").decode("utf-8", "replace")
        return f"{text} at offset {at.value} (the PCRE ngx.re runs)"
    old.free(compiled)
    return None


def regex_value_error(value: str) -> str | None:
    """For a value NGINX's ``map`` reads (VirtualServer match conditions, rate
    limit tiers): ``~``/``~*`` starts a regular expression, anything else is a
    string; why the regular expression cannot run, or None."""
    if not value.startswith("~"):
        return None
    error = pcre_error(value.removeprefix("~*") if value.startswith("~*") else value[1:])
    return None if error is None else f"must be a valid regular expression: {error}"
