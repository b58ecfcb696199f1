"""NGINX's configuration reader (ngx_conf_read_token), enough to list directives.

Tests use it to see nginx.conf as NGINX will: which directives, in which block,
with how many arguments — so a property can show that no value placed in the
text adds a directive or a block.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Directive:
    path: tuple[str, ...]  # the enclosing blocks' directive names
    name: str
    args: tuple[str, ...]


class TokenError(ValueError):
    pass


def _unescape(raw: str) -> str:
    out = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            if nxt in "\"'\\":
                out.append(nxt)
                i += 2
                continue
            if nxt in "trn":
                out.append({"t": "\t", "r": "\r", "n": "\n"}[nxt])
                i += 2
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _lua_block_end(text: str, i: int) -> int:
    """After the ``}`` closing the Lua block opened at ``i`` (braces balance in
    ferryman's Lua blocks, which hold no strings with braces)."""
    depth = 0
    while i < len(text):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise TokenError("unterminated Lua block")


def directives(text: str) -> list[Directive]:
    """Every directive of ``text`` (block directives too, with their path)."""
    out: list[Directive] = []
    stack: list[str] = []
    words: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
            continue
        if c == ";":
            if not words:
                raise TokenError("unexpected ;")
            out.append(Directive(tuple(stack), words[0], tuple(words[1:])))
            words = []
            i += 1
            continue
        if c == "{":
            if not words:
                raise TokenError("unexpected {")
            out.append(Directive(tuple(stack), words[0], tuple(words[1:])))
            if words[0].endswith("_by_lua_block"):
                i = _lua_block_end(text, i)  # Lua, read by the Lua module's own reader
            else:
                stack.append(words[0])
                i += 1
            words = []
            continue
        if c == "}":
            if words or not stack:
                raise TokenError("unexpected }")
            stack.pop()
            i += 1
            continue
        if c == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c in "\"'":
            quote = c
            i += 1
            start = i
            while i < n and text[i] != quote:
                i += 2 if text[i] == "\\" else 1
            if i >= n:
                raise TokenError("unterminated quote")
            words.append(_unescape(text[start:i]))
            i += 1
            if i < n and text[i] not in " \t\r\n;{)":
                raise TokenError(f"unexpected {text[i]!r} after a quoted string")
            continue
        start = i
        variable = False
        while i < n:
            ch = text[i]
            if ch == "{" and variable:
                i += 1
                continue
            variable = False
            if ch == "\\":
                i += 2
                continue
            if ch == "$":
                variable = True
                i += 1
                continue
            if ch in " \t\r\n;{":
                break
            i += 1
        words.append(_unescape(text[start:i]))
    if words or stack:
        raise TokenError("unexpected end of file")
    return out
