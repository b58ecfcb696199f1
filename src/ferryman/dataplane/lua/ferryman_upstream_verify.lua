-- An upstream's certificate verified against a Policy's CAs, per request:
-- egressMTLS verifyServer and externalAuth sslVerify (NIC's proxy_ssl_verify,
-- proxy_ssl_trusted_certificate, proxy_ssl_verify_depth). Those directives take
-- no variables, so ngx_http_ferryman_module does it (ngx_http_ferryman_verify.c
-- says how): the balancer hands it the request, and it gives the request's
-- upstream a TLS context trusting the CAs, with NGINX's own verification on.
-- A Policy or CA Secret change is a push, never a reload.
--
-- A policy's decoded P item holds its CA set (set: the CAs, the depth, the
-- flags and a digest of them, the key); the access phase keeps it and names
-- the key in $ferryman_egress_verify (a subrequest: in its vars); the balancer
-- applies it before the first attempt's connect (apply).

local ffi = require("ffi")
local base = require("resty.core.base")

local md5 = ngx.md5

local _M = {}

-- ngx_http_ferryman_upstream_verify's flags (ngx_http_ferryman_verify.c).
_M.SNI = 1 -- send the name as SNI
_M.H2 = 2 -- gRPC's ALPN

local native = nil
do
    pcall(ffi.cdef, [[
        int ngx_http_ferryman_upstream_verify(void *r, const char *key, size_t key_len,
            const char *pem, size_t pem_len, int depth, int flags);
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

-- A CA set (PEM) with its depth and flags, and its key.
function _M.set(pem, depth, flags)
    return { key = md5(depth .. "|" .. flags .. "|" .. pem), pem = pem, depth = depth, flags = flags }
end

-- Makes the set known to apply (the access phase, per request, before it names
-- the key in $ferryman_egress_verify); false when this NGINX cannot verify
-- (no module): the caller answers 500, never an unverified connection.
function _M.keep(set)
    if native == nil then
        ngx.log(ngx.ERR, "ferryman: upstream verification needs ngx_http_ferryman_module")
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
        base.get_request(), key, #key, set.pem, #set.pem, set.depth, set.flags
    )
    return rc == 0
end

return _M
