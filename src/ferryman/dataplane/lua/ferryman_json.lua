-- A JSON reader (RFC 8259) for what clients send: a JWT's header and claims.
-- Debian's lua-nginx-module comes without cjson, and the text is the client's,
-- so this reader is strict (anything but one JSON value with optional white
-- space around it is refused) and bounded (nesting depth), and never raises:
-- decode() answers nil, reason.

local byte, sub, find, char = string.byte, string.sub, string.find, string.char
local concat = table.concat
local floor = math.floor

local _M = {}

-- Deeper nesting is refused rather than recursed into (C stack, time).
local MAX_DEPTH = 32

local ESCAPES = {
    [34] = '"',
    [92] = "\\",
    [47] = "/",
    [98] = "\b",
    [102] = "\f",
    [110] = "\n",
    [114] = "\r",
    [116] = "\t",
}

local function utf8(code)
    if code < 0x80 then
        return char(code)
    elseif code < 0x800 then
        return char(0xC0 + floor(code / 0x40), 0x80 + code % 0x40)
    elseif code < 0x10000 then
        return char(0xE0 + floor(code / 0x1000), 0x80 + floor(code / 0x40) % 0x40, 0x80 + code % 0x40)
    end
    return char(
        0xF0 + floor(code / 0x40000),
        0x80 + floor(code / 0x1000) % 0x40,
        0x80 + floor(code / 0x40) % 0x40,
        0x80 + code % 0x40
    )
end

local function skip(text, at)
    local _, last = find(text, "^[ \t\r\n]*", at)
    return last + 1
end

local value_at

local function string_at(text, at)
    -- at is just after the opening quote
    local parts = {}
    while true do
        local s, e = find(text, '^[^"\\%z\1-\31]+', at)
        if s then
            parts[#parts + 1] = sub(text, s, e)
            at = e + 1
        end
        local b = byte(text, at)
        if b == 34 then
            return concat(parts), at + 1
        elseif b ~= 92 then
            return nil, "bad string"
        end
        local escape = byte(text, at + 1)
        if escape == 117 then -- \uXXXX, with surrogate pairs
            local code = tonumber(sub(text, at + 2, at + 5), 16)
            if code == nil or not find(sub(text, at + 2, at + 5), "^%x%x%x%x$") then
                return nil, "bad escape"
            end
            at = at + 6
            if code >= 0xD800 and code <= 0xDBFF then
                local low = sub(text, at, at + 5)
                local lo = find(low, "^\\u[dD][c-fC-F]%x%x$") and tonumber(sub(low, 3), 16)
                if not lo then
                    return nil, "bad surrogate"
                end
                code = 0x10000 + (code - 0xD800) * 0x400 + (lo - 0xDC00)
                at = at + 6
            elseif code >= 0xDC00 and code <= 0xDFFF then
                return nil, "bad surrogate"
            end
            parts[#parts + 1] = utf8(code)
        else
            local plain = ESCAPES[escape]
            if plain == nil then
                return nil, "bad escape"
            end
            parts[#parts + 1] = plain
            at = at + 2
        end
    end
end

local function container_at(text, at, depth, object)
    if depth > MAX_DEPTH then
        return nil, "too deep"
    end
    local out, n = {}, 0
    if not object then
        setmetatable(out, _M.array)
    end
    local close = object and 125 or 93
    at = skip(text, at)
    if byte(text, at) == close then
        return out, at + 1
    end
    while true do
        local key
        if object then
            if byte(text, at) ~= 34 then
                return nil, "bad key"
            end
            key, at = string_at(text, at + 1)
            if key == nil then
                return nil, at
            end
            at = skip(text, at)
            if byte(text, at) ~= 58 then
                return nil, "no colon"
            end
            at = skip(text, at + 1)
        end
        local value
        value, at = value_at(text, at, depth + 1)
        if value == nil then
            return nil, at
        end
        if object then
            out[key] = value
        else
            n = n + 1
            out[n] = value
        end
        at = skip(text, at)
        local b = byte(text, at)
        if b == close then
            return out, at + 1
        elseif b ~= 44 then
            return nil, "bad separator"
        end
        at = skip(text, at + 1)
    end
end

-- JSON null is this table, so a member that is null is still present.
_M.null = setmetatable({}, {
    __tostring = function()
        return "null"
    end,
})
-- The metatable of arrays: an empty array and an empty object differ.
_M.array = {}

value_at = function(text, at, depth)
    local b = byte(text, at)
    if b == 34 then
        return string_at(text, at + 1)
    elseif b == 123 then
        return container_at(text, at + 1, depth, true)
    elseif b == 91 then
        return container_at(text, at + 1, depth, false)
    end
    local s, e = find(text, "^-?%d+%.?%d*[eE]?[-+]?%d*", at)
    if s then
        local number = sub(text, s, e)
        local n = tonumber(number)
        if n == nil or find(number, "^-?0%d") or find(number, "%.$") or find(number, "%.[eE]")
            or find(number, "%d[-+]") then
            return nil, "bad number"
        end
        return n, e + 1
    end
    for word, value in pairs({ ["true"] = true, ["false"] = false, ["null"] = _M.null }) do
        if sub(text, at, at + #word - 1) == word then
            return value, at + #word
        end
    end
    return nil, "bad value"
end

-- The value text holds (objects as tables with string keys, arrays as
-- sequences with the metatable _M.array, null as _M.null), or nil and why.
function _M.decode(text)
    local value, at = value_at(text, skip(text, 1), 1)
    if value == nil then
        return nil, at
    end
    if skip(text, at) ~= #text + 1 then
        return nil, "trailing text"
    end
    return value
end

return _M
