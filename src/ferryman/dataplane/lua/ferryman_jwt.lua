-- The jwt policy: a JSON Web Token checked per request against a key set
-- pushed by ferryman (a J record: ferryman.resources.secret_jwk says what it
-- holds), as NGINX Plus's auth_jwt with auth_jwt_key_file does for NIC.
-- Open-source NGINX has no JWT module; the signatures are checked with the
-- libcrypto NGINX itself is linked with (LuaJIT FFI), so no library is added
-- and a key set changes with a push, never a reload.
--
-- Algorithms: RS256/384/512 (PKCS#1 v1.5), PS256/384/512 (PSS, salt as long
-- as the hash), ES256/384/512 (JOSE's r||s, turned into DER for libcrypto),
-- HS256/384/512. Claims: exp and nbf against NGINX's clock (no leeway, as
-- auth_jwt_leeway's default). Answers as auth_jwt does: 401 with
-- `WWW-Authenticate: Bearer realm="<realm>"`, with `,error="invalid_token"`
-- when a token was sent but is not valid.

local ffi = require("ffi")
local json = require("ferryman_json")
local vars = require("ferryman_policy_vars")
local b64 = require("ngx.base64")

local byte, sub, char, find, lower = string.byte, string.sub, string.char, string.find, string.lower
local decode_base64 = ngx.decode_base64
local decode_base64url = b64.decode_base64url

local C = require("ferryman_openssl")

-- OpenSSL's constants (rsa.h): PSS padding, salt length = the digest's.
local RSA_PKCS1_PSS_PADDING = 6
local RSA_PSS_SALTLEN_DIGEST = -1

local DIGESTS = { ["256"] = "SHA256", ["384"] = "SHA384", ["512"] = "SHA512" }
-- The size of r and of s in an ES signature (RFC 7518 3.4).
local EC_SIZE = { ES256 = 32, ES384 = 48, ES512 = 66 }

-- Longer tokens are refused unread (NGINX's header buffers are 8 KiB anyway).
local MAX_TOKEN = 16384

local _M = {}

local digests = {}
local function digest(alg)
    local name = DIGESTS[sub(alg, 3)]
    local md = digests[name]
    if md == nil and name then
        md = C.EVP_get_digestbyname(name)
        digests[name] = md
    end
    return md
end

local function public_key(pem)
    local bio = C.BIO_new_mem_buf(pem, #pem)
    if bio == nil then
        return nil
    end
    local pkey = C.PEM_read_bio_PUBKEY(bio, nil, nil, nil)
    C.BIO_free(bio)
    if pkey == nil then
        C.ERR_clear_error()
        return nil
    end
    return ffi.gc(pkey, C.EVP_PKEY_free)
end

-- A J record as a list of { kid = <string|nil>, algs = { RS256 = true, ... },
-- pkey = <EVP_PKEY> or secret = <bytes> }; nil when a key does not load.
function _M.decode_keys(raw)
    local keys = {}
    for kid, algs, material in string.gmatch(raw, "([^:%s]+):([^:%s]+):([^:%s]+)") do
        local key = { kid = kid ~= "-" and decode_base64(kid) or nil, algs = {} }
        local hmac = false
        for alg in string.gmatch(algs, "[^,]+") do
            key.algs[alg] = true
            hmac = hmac or sub(alg, 1, 2) == "HS"
        end
        local bytes = decode_base64(material)
        if hmac then
            key.secret = bytes
        else
            key.pkey = bytes and public_key(bytes)
            if key.pkey == nil then
                return nil
            end
        end
        keys[#keys + 1] = key
    end
    return keys
end

-- JOSE's fixed-size big-endian integer as a DER INTEGER.
local function der_integer(bytes)
    local at = 1
    while at < #bytes and byte(bytes, at) == 0 do
        at = at + 1
    end
    local v = sub(bytes, at)
    if byte(v, 1) >= 0x80 then
        v = "\0" .. v
    end
    return "\2" .. char(#v) .. v
end

-- r||s as the DER ECDSA-Sig-Value libcrypto verifies (RFC 7518 3.4).
local function ecdsa_der(signature, size)
    local body = der_integer(sub(signature, 1, size)) .. der_integer(sub(signature, size + 1))
    local length = #body < 128 and char(#body) or ("\129" .. char(#body))
    return "\48" .. length .. body
end

local function verify_signature(alg, key, signing_input, signature)
    local md = digest(alg)
    if md == nil then
        return false
    end
    local family = sub(alg, 1, 2)
    if family == "HS" then
        local out = ffi.new("unsigned char[64]")
        local out_len = ffi.new("unsigned int[1]")
        if C.HMAC(md, key.secret, #key.secret, signing_input, #signing_input, out, out_len) == nil then
            C.ERR_clear_error()
            return false
        end
        return out_len[0] == #signature and C.CRYPTO_memcmp(out, signature, #signature) == 0
    end
    if family == "ES" then
        local size = EC_SIZE[alg]
        if #signature ~= 2 * size then
            return false
        end
        signature = ecdsa_der(signature, size)
    end
    local ctx = C.EVP_MD_CTX_new()
    if ctx == nil then
        return false
    end
    local pctx = ffi.new("void *[1]")
    local ok = C.EVP_DigestVerifyInit(ctx, pctx, md, nil, key.pkey) == 1
    if ok and family == "PS" then
        ok = C.EVP_PKEY_CTX_set_rsa_padding(pctx[0], RSA_PKCS1_PSS_PADDING) > 0
            and C.EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx[0], RSA_PSS_SALTLEN_DIGEST) > 0
    end
    ok = ok and C.EVP_DigestVerify(ctx, signature, #signature, signing_input, #signing_input) == 1
    C.EVP_MD_CTX_free(ctx)
    if not ok then
        -- A failed check leaves errors in this thread's OpenSSL queue, where
        -- NGINX's next TLS call on this worker would find them.
        C.ERR_clear_error()
    end
    return ok
end

local function json_part(text)
    local raw = text and decode_base64url(text)
    local value = raw and json.decode(raw)
    if type(value) ~= "table" or value == json.null or getmetatable(value) == json.array then
        return nil
    end
    return value
end

-- The claims of token when its signature verifies with one of keys; else nil
-- and why.
local function signed_claims(token, keys)
    if #token > MAX_TOKEN then
        return nil, "token too long"
    end
    local dot1 = find(token, ".", 1, true)
    local dot2 = dot1 and find(token, ".", dot1 + 1, true)
    if dot2 == nil or find(token, ".", dot2 + 1, true) then
        return nil, "not a signed JWT (three parts)"
    end
    local header = json_part(sub(token, 1, dot1 - 1))
    local claims = json_part(sub(token, dot1 + 1, dot2 - 1))
    local signature = decode_base64url(sub(token, dot2 + 1))
    if header == nil or claims == nil or signature == nil then
        return nil, "malformed"
    end
    local alg, kid = header.alg, header.kid
    if type(alg) ~= "string" or digest(alg) == nil or not find(alg, "^[RPEH]S%d+$") then
        return nil, "algorithm not supported"
    end
    if header.crit ~= nil then
        return nil, "critical header parameters are not supported"
    end
    if kid ~= nil and type(kid) ~= "string" then
        return nil, "kid is not a string"
    end
    local signing_input = sub(token, 1, dot2 - 1)
    for _, key in ipairs(keys) do
        if key.algs[alg] and (kid == nil or key.kid == kid) then
            if verify_signature(alg, key, signing_input, signature) then
                return claims
            end
        end
    end
    return nil, "no key verifies the signature"
end

-- Tokens whose signature verified, per key set (a table of the key set, which
-- a rotated Secret replaces): clients send the same token again and again, and
-- its signature verifies the same way each time; exp and nbf are checked on
-- every request. Bounded: the table starts again when full.
local MAX_VERIFIED = 2000

-- Whether token verifies with one of keys and its exp/nbf hold at now:
-- true and its claims, or nil and why (for the error log).
function _M.verify(token, keys, now)
    local verified = keys.verified
    if verified == nil then
        verified = { n = 0, claims = {} }
        keys.verified = verified
    end
    local claims = verified.claims[token]
    if claims == nil then
        local why
        claims, why = signed_claims(token, keys)
        if claims == nil then
            return nil, why
        end
        if verified.n >= MAX_VERIFIED then
            verified.n, verified.claims = 0, {}
        end
        verified.claims[token] = claims
        verified.n = verified.n + 1
    end
    local exp, nbf = claims.exp, claims.nbf
    if exp ~= nil and (type(exp) ~= "number" or now >= exp) then
        return nil, "expired"
    end
    if nbf ~= nil and (type(nbf) ~= "number" or now < nbf) then
        return nil, "not yet valid"
    end
    return true, claims
end

-- The token of this request: the variable NIC's `token` names ("$http_x",
-- "$arg_x", "$cookie_x"), else the Authorization header's Bearer credentials.
local function request_token(variable)
    if variable and variable ~= "" then
        local value = ngx.var[sub(variable, 2)]
        return value ~= "" and value or nil
    end
    local authorization = ngx.var.http_authorization
    if authorization == nil then
        return nil
    end
    local scheme, credentials = string.match(authorization, "^(%S+)%s+(%S+)%s*$")
    if scheme == nil or lower(scheme) ~= "bearer" then
        return nil
    end
    return credentials
end

-- Key sets by their record: a V record is decoded again whenever the dict's
-- version moves, a key set's keys need not be parsed again with it.
-- lua-resty-lrucache (installed with lua-resty-core): when full it drops the
-- least recently used entry, not every entry, so a burst of new keys does not
-- cost every other one its parse.
local key_sets = require("resty.lrucache").new(1000)

-- The P item's fields (ferryman.kinds.policy.records.jwt): realm, token variable,
-- key set, each base64. keys is false when the set does not load.
function _M.decode(f)
    local raw = decode_base64(f[3] or "") or ""
    local keys = key_sets:get(raw)
    if keys == nil then
        keys = _M.decode_keys(raw) or false
        key_sets:set(raw, keys)
    end
    return {
        realm = decode_base64(f[1] or "") or "",
        token = decode_base64(f[2] or "") or "",
        keys = keys,
    }
end

-- Access phase: nil when the request's token is valid; else the status
-- auth_jwt answers, 401 with its challenge. No usable keys: 500 (what NGINX
-- Plus answers for a key file it cannot use, and NIC for a route whose
-- policy is invalid).
function _M.check(config)
    if not config.keys then
        return ngx.HTTP_INTERNAL_SERVER_ERROR
    end
    local token = request_token(config.token)
    local challenge = 'Bearer realm="' .. config.realm .. '"'
    if token ~= nil then
        if ngx.ctx.ferryman_jwt_claims then
            return nil -- verified for this request already (a rate limit's tier)
        end
        local ok, why = _M.verify(token, config.keys, ngx.time())
        if ok then
            return nil
        end
        ngx.log(ngx.INFO, "ferryman: JWT refused: ", why)
        challenge = challenge .. ',error="invalid_token"'
    end
    ngx.header["WWW-Authenticate"] = challenge
    return ngx.HTTP_UNAUTHORIZED
end

-- The claims of this request's token under config when it is valid, else
-- false; once per request (ngx.ctx), whichever asks first: a rate limit's
-- tier (NGINX's preaccess phase, before auth_jwt) or the check.
local function request_claims(config)
    local ctx = ngx.ctx
    local found = ctx.ferryman_jwt_claims
    if found == nil then
        found = false
        local token = config.keys and request_token(config.token)
        if token then
            local ok, claims = _M.verify(token, config.keys, ngx.time())
            found = ok and claims or false
        end
        ctx.ferryman_jwt_claims = found
    end
    return found
end

-- A claim as NGINX Plus's $jwt_claim_ variables hold it: text as it is,
-- numbers and booleans written out, an array's elements joined by commas.
local function claim_text(value)
    local kind = type(value)
    if kind == "string" then
        return value
    elseif kind == "number" then
        return value == math.floor(value) and string.format("%d", value) or tostring(value)
    elseif kind == "boolean" then
        return tostring(value)
    elseif kind == "table" and getmetatable(value) == json.array then
        local out = {}
        for i, v in ipairs(value) do
            out[i] = claim_text(v) or ""
        end
        return table.concat(out, ",")
    end
    return nil
end

-- NIC's rate-limit condition on a claim ("jwt:<a.b.c>", a path into nested
-- objects) and ${jwt_claim_<name>} in keys: the claims of the route's jwt
-- Policy; none (no jwt Policy, no valid token): empty.
local function claim(path, set)
    local config = set and set.j
    local value = config and request_claims(config)
    if not value then
        return ""
    end
    for name in string.gmatch(path, "[^.]+") do
        if type(value) ~= "table" or getmetatable(value) == json.array then
            return ""
        end
        value = value[name]
    end
    return claim_text(value) or ""
end

vars.prefixed["jwt:"] = claim
vars.prefixed["jwt_claim_"] = function(name, set)
    local config = set and set.j
    local claims = config and request_claims(config)
    return claims and claim_text(claims[name]) or ""
end

return _M
