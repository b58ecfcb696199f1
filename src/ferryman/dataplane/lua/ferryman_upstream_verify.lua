-- An upstream's certificate verified against a Policy's CAs, per request:
-- egressMTLS verifyServer and externalAuth sslVerify (NIC's proxy_ssl_verify,
-- proxy_ssl_trusted_certificate, proxy_ssl_verify_depth). Those directives take
-- no variables, so ngx_http_ferryman_module does it (ngx_http_ferryman_verify.c
-- says how): the balancer hands it the request, and it gives the request's
-- upstream a TLS context trusting the CAs, with NGINX's own verification on.
-- The same context carries egressMTLS protocols and ciphers (NGINX's
-- proxy_ssl_protocols and proxy_ssl_ciphers take no variables either). A
-- Policy or CA Secret change is a push, never a reload.
--
-- A policy's decoded P item holds its CA set (set: the CAs, the depth, the
-- flags and a digest of them, the key); the access phase keeps it and names
-- the key in $ferryman_egress_verify (a subrequest: in its vars); the balancer
-- applies it before the first attempt's connect (apply).

local bor = require("bit").bor
local ffi = require("ffi")
local base = require("resty.core.base")

local md5 = ngx.md5

local _M = {}

-- ngx_http_ferryman_upstream_verify's flags (ngx_http_ferryman_verify.c).
_M.SNI = 1 -- send the name as SNI
_M.H2 = 2 -- gRPC's ALPN
_M.VERIFY = 4 -- verify the certificate (else protocols and ciphers only)
_M.SANS = 8 -- the certificate holds one of the set's SANs, not the name
-- Its protocol bits.
local PROTOCOLS = {
    ["TLSv1"] = 1, ["TLSv1.1"] = 2, ["TLSv1.2"] = 4, ["TLSv1.3"] = 8, ["SSLv2"] = 16, ["SSLv3"] = 32,
}

local native = nil
do
    pcall(ffi.cdef, [[
        int ngx_http_ferryman_upstream_verify(void *r, const char *key, size_t key_len,
            const char *pem, size_t pem_len, int depth, int flags, int protocols,
            const char *ciphers, size_t ciphers_len, const char *sans, size_t sans_len);
    ]])
    if pcall(function()
        return ffi.C.ngx_http_ferryman_upstream_verify
    end) then
        native = ffi.C
    end
end

-- The CA sets by key, in two generations: the access phase keeps the set its
-- request names (keep), and a full generation is dropped a whole generation
-- later, so a set named by a request in flight outlives the next few hundred.
local GENERATION = 256
local current, previous, count = {}, {}, 0

local function lookup(key)
    return current[key] or previous[key]
end

-- A context's settings: the CA set (PEM; none: the system's), its depth and
-- flags, the protocols (names, ","-separated; "": the location's), the
-- cipher list ("": DEFAULT) and the SANs (SANS: "\n"-separated "H<name>",
-- "U<URI>"; ferryman_gateway_tls.lua); and its key, a digest of them.
function _M.set(pem, depth, flags, protocols, ciphers, sans)
    local mask = 0
    for name in string.gmatch(protocols or "", "[^,]+") do
        mask = bor(mask, PROTOCOLS[name] or 0)
    end
    ciphers = ciphers or ""
    sans = sans or ""
    return {
        key = md5(depth .. "|" .. flags .. "|" .. mask .. "|" .. ciphers .. "|" .. sans .. "|" .. pem),
        sans = sans,
        pem = pem,
        depth = depth,
        flags = flags,
        protocols = mask,
        ciphers = ciphers,
    }
end

-- Makes the set known to apply (the access phase, per request, before it names
-- the key in $ferryman_egress_verify); false when this NGINX cannot (no
-- module): a set that verifies is then answered 500, never an unverified
-- connection; one of protocols and ciphers only proxies with NGINX's.
function _M.keep(set)
    if native == nil then
        ngx.log(ngx.ERR, "ferryman: upstream TLS settings need ngx_http_ferryman_module")
        return false
    end
    local key = set.key
    if current[key] == nil then
        if count >= GENERATION then
            previous, current, count = current, {}, 0
        end
        count = count + 1
        current[key] = set
    end
    return true
end

-- In the balancer, before the first attempt: the request's upstream verifies
-- with the set $ferryman_egress_verify names. false: it cannot be (the
-- balancer fails the request, 502, as NGINX fails an attempt it cannot make).
function _M.apply()
    local key = ngx.var.ferryman_egress_verify
    if key == nil or key == "" then
        return true
    end
    local set = lookup(key)
    if native == nil or set == nil then
        ngx.log(ngx.ERR, "ferryman: upstream verification ", key, " is unknown")
        return false
    end
    local rc = native.ngx_http_ferryman_upstream_verify(
        base.get_request(), key, #key, set.pem, #set.pem, set.depth, set.flags,
        set.protocols, set.ciphers, #set.ciphers, set.sans, #set.sans
    )
    return rc == 0
end

return _M
