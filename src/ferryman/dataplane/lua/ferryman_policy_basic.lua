-- The basicAuth Policy: NGINX's auth_basic with the Secret's htpasswd file.
-- P item: b|<realm>|<htpasswd> (base64). As ngx_http_auth_basic_module: the
-- first line naming the user decides; NGINX's own schemes ({PLAIN}, {SHA},
-- {SSHA}, $apr1$) are computed here, every other hash by the C library's
-- crypt(3) (libxcrypt: $1$, $5$, $6$, $y$, $2b$, DES...), through LuaJIT's FFI.

local ffi = require("ffi")

local decode_base64, encode_base64 = ngx.decode_base64, ngx.encode_base64
local md5_bin, sha1_bin = ngx.md5_bin, ngx.sha1_bin
local byte, sub, find = string.byte, string.sub, string.find
local band, bor, rshift, lshift = bit.band, bit.bor, bit.rshift, bit.lshift

-- pcall: another module may have declared it already (a redefinition raises).
pcall(ffi.cdef, [[
    char *crypt(const char *phrase, const char *setting);
]])
-- NGINX links libcrypt: its symbols are global in the worker. Looked up on
-- first use, so loading this module never fails where no hash needs it.
local libc_crypt_fn = nil
local function libc_crypt(password, setting)
    if libc_crypt_fn == nil then
        local ok, fn = pcall(function()
            return ffi.C.crypt
        end)
        libc_crypt_fn = ok and fn or ffi.load("crypt").crypt
    end
    return libc_crypt_fn(password, setting)
end

local _M = {}

function _M.decode(f)
    local realm = decode_base64(f[1]) or ""
    return {
        -- NGINX's header: Basic realm="<realm>".
        challenge = 'Basic realm="' .. realm .. '"',
        file = decode_base64(f[2]) or "",
    }
end

-- The hash on the first line for ``user`` (NGINX's parser: "#" lines and
-- blank ones skipped; the hash ends at a line break or ":").
local function hash_of(file, user)
    local start, n = 1, #file
    local prefix = user .. ":"
    while start <= n do
        local stop = find(file, "\n", start, true) or (n + 1)
        local line = sub(file, start, stop - 1)
        local first = byte(line, 1)
        if first ~= 35 and first ~= 13 and sub(line, 1, #prefix) == prefix then
            local rest = sub(line, #prefix + 1)
            local cut = find(rest, "[\r:]")
            return cut and sub(rest, 1, cut - 1) or rest
        end
        start = stop + 1
    end
    return nil
end

local ITOA64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

local function to64(v, n)
    local out = {}
    for i = 1, n do
        local c = band(v, 0x3f) + 1
        out[i] = sub(ITOA64, c, c)
        v = rshift(v, 6)
    end
    return table.concat(out)
end

-- Apache's MD5 crypt ($apr1$), as ngx_crypt_apr1.
local function apr1(password, setting)
    local rest = sub(setting, 7)
    local stop = find(rest, "$", 1, true)
    local salt = sub(rest, 1, math.min(8, (stop or (#rest + 1)) - 1))
    local magic = "$apr1$"
    local ctx = { password, magic, salt }
    local final = md5_bin(password .. salt .. password)
    local left = #password
    while left > 0 do
        ctx[#ctx + 1] = sub(final, 1, left > 16 and 16 or left)
        left = left - 16
    end
    local i = #password
    while i > 0 do
        ctx[#ctx + 1] = band(i, 1) == 1 and "\0" or sub(password, 1, 1)
        i = rshift(i, 1)
    end
    final = md5_bin(table.concat(ctx))
    for round = 0, 999 do
        local odd = band(round, 1) == 1
        local c = { odd and password or final }
        if round % 3 ~= 0 then
            c[#c + 1] = salt
        end
        if round % 7 ~= 0 then
            c[#c + 1] = password
        end
        c[#c + 1] = odd and final or password
        final = md5_bin(table.concat(c))
    end
    local b = { byte(final, 1, 16) }
    local function three(x, y, z)
        return bor(lshift(b[x + 1], 16), lshift(b[y + 1], 8), b[z + 1])
    end
    return magic .. salt .. "$" .. to64(three(0, 6, 12), 4) .. to64(three(1, 7, 13), 4)
        .. to64(three(2, 8, 14), 4) .. to64(three(3, 9, 15), 4) .. to64(three(4, 10, 5), 4)
        .. to64(b[12], 2)
end

-- ngx_crypt: the string the stored hash must equal; nil when crypt(3)
-- refuses the setting (NGINX then answers 500).
local function encrypt(password, setting)
    if sub(setting, 1, 6) == "$apr1$" then
        return apr1(password, setting)
    elseif sub(setting, 1, 7) == "{PLAIN}" then
        return "{PLAIN}" .. password
    elseif sub(setting, 1, 6) == "{SSHA}" then
        local decoded = decode_base64(sub(setting, 7)) or ""
        local salt = sub(decoded, 21)
        return "{SSHA}" .. encode_base64(sha1_bin(password .. salt) .. salt)
    elseif sub(setting, 1, 5) == "{SHA}" then
        return "{SHA}" .. encode_base64(sha1_bin(password))
    end
    local out = libc_crypt(password, setting)
    if out == nil then
        return nil
    end
    return ffi.string(out)
end

-- ngx_http_auth_basic_user: "Basic <base64 user:password>", a user required.
local function credentials()
    local header = ngx.var.http_authorization
    if header == nil or #header < 6 or string.lower(sub(header, 1, 6)) ~= "basic " then
        return nil
    end
    local token = string.match(sub(header, 7), "^ *(.*)$")
    local decoded = token ~= "" and decode_base64(token)
    if not decoded then
        return nil
    end
    local colon = find(decoded, ":", 1, true)
    if colon == nil or colon == 1 then
        return nil
    end
    return sub(decoded, 1, colon - 1), sub(decoded, colon + 1)
end

function _M.check(config)
    local user, password = credentials()
    if user then
        local hash = hash_of(config.file, user)
        if hash then
            local encrypted = encrypt(password, hash)
            if encrypted == nil then
                ngx.log(ngx.ERR, "crypt() failed for user \"", user, "\"")
                return ngx.HTTP_INTERNAL_SERVER_ERROR
            end
            if encrypted == hash then
                return nil
            end
            ngx.log(ngx.ERR, "user \"", user, "\": password mismatch")
        else
            ngx.log(ngx.ERR, "user \"", user, "\" was not found in the htpasswd Secret")
        end
    end
    ngx.header["WWW-Authenticate"] = config.challenge
    return ngx.HTTP_UNAUTHORIZED
end

return _M
