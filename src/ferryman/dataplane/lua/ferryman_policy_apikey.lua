-- The apiKey Policy: NIC's auth_request to its njs check. The values of the
-- named headers and query arguments, concatenated in that order (NIC's
-- $header_query_value), are hashed (SHA-256) and looked up among the
-- Secret's keys' hashes: nothing supplied 401, no such key 403.
-- P item: kinds/policy/records/auth.py.

local ffi = require("ffi")
local vars = require("ferryman_policy_vars")

local decode_base64 = ngx.decode_base64
local gsub, lower = string.gsub, string.lower

-- pcall: another module may have declared it already (a redefinition raises).
pcall(ffi.cdef, [[
    unsigned char *SHA256(const unsigned char *d, size_t n, unsigned char *md);
]])
-- NGINX links libcrypto (OpenSSL): its symbols are global in the worker.
-- Looked up on first use, as in ferryman_policy_basic.lua.
local sha256 = nil
local digest = ffi.new("unsigned char[32]")

local function hex_sha256(text)
    if sha256 == nil then
        local ok, fn = pcall(function()
            return ffi.C.SHA256
        end)
        sha256 = ok and fn or ffi.load("crypto").SHA256
    end
    sha256(text, #text, digest)
    return (gsub(ffi.string(digest, 32), ".", function(c)
        return string.format("%02x", string.byte(c))
    end))
end

local _M = {}

local function names(text, prefix, normalize)
    local out = {}
    for item in string.gmatch(text, "[^,]+") do
        local name = decode_base64(item)
        out[#out + 1] = prefix .. (normalize and gsub(lower(name), "-", "_") or name)
    end
    return out
end

function _M.decode(f)
    local clients = {}
    for item in string.gmatch(f[3] or "", "[^,]+") do
        local id, hash = string.match(item, "^([^:]*):(%x+)$")
        if id then
            clients[hash] = decode_base64(id)
        end
    end
    local sources = names(f[1] or "", "http_", true)
    for _, name in ipairs(names(f[2] or "", "arg_", false)) do
        sources[#sources + 1] = name
    end
    return { sources = sources, clients = clients }
end

local function supplied(config)
    local var = ngx.var
    local parts = {}
    for _, name in ipairs(config.sources) do
        parts[#parts + 1] = var[name] or ""
    end
    return table.concat(parts)
end

-- The client whose key was supplied, or nil; once per request.
local function client_of(config)
    local ctx = ngx.ctx
    local found = ctx.ferryman_apikey_client
    if found == nil then
        local value = supplied(config)
        found = value ~= "" and config.clients[hex_sha256(value)] or false
        ctx.ferryman_apikey_client = found
    end
    return found or nil
end

-- NIC's $apikey_client_name and $apikey_auth_token (the supplied key's
-- SHA-256, hex), for rate-limit keys and conditions.
vars.named.apikey_client_name = function(set)
    return set.k and client_of(set.k) or ""
end

-- NIC's $apikey_auth_token (njs apikey_auth.hash): the supplied value's
-- SHA-256, hex, also of nothing supplied; rate limits key buckets by it.
vars.named.apikey_auth_token = function(set)
    return set.k and hex_sha256(supplied(set.k)) or ""
end

function _M.check(config)
    if supplied(config) == "" then
        return ngx.HTTP_UNAUTHORIZED
    end
    if client_of(config) == nil then
        return ngx.HTTP_FORBIDDEN
    end
    return nil
end

return _M
