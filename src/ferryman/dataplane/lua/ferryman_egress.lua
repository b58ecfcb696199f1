-- The egressMTLS Policy (ferryman.kinds.policy.records.egress_mtls): the client
-- certificate and key NGINX presents to a TLS upstream, the name it sends
-- as SNI, and the CAs it verifies the upstream's certificate with, per
-- request. The slow path's location has
--   proxy_ssl_certificate $ferryman_egress_cert;  (and _key)
--   proxy_ssl_name $ferryman_egress_name;  proxy_ssl_server_name on;
-- NGINX (>= 1.21) reads "data:<PEM>" values as the certificate itself, and an
-- empty one as none; an empty name sends no SNI. verifyServer is
-- ferryman_upstream_verify's ($ferryman_egress_verify names the CA set; the
-- name is then the one verified, sent as SNI only with serverName). So a
-- changed Policy or Secret is a push, never a reload.
-- protocols and ciphers are the same context's (ngx_http_ferryman_module's).
-- P item: e|<chain>|<key>|<name>, each base64, and with verifyServer,
-- protocols or ciphers |<CAs, base64, "": not verified>|<verifyDepth>|
-- <serverName 0|1>|<protocols, ","-separated>|<ciphers, base64>.

local band = require("bit").band
local decode_base64 = ngx.decode_base64
local verify = require("ferryman_upstream_verify")

local _M = {}

function _M.decode(f)
    local chain = decode_base64(f[1] or "") or ""
    local key = decode_base64(f[2] or "") or ""
    local config = {
        cert = chain ~= "" and ("data:" .. chain) or "",
        key = key ~= "" and ("data:" .. key) or "",
        name = decode_base64(f[3] or "") or "",
    }
    local cas = decode_base64(f[4] or "") or ""
    local protocols = f[7] or ""
    local ciphers = decode_base64(f[8] or "") or ""
    if cas ~= "" or protocols ~= "" or ciphers ~= "" then
        local depth = tonumber(f[5]) or 1
        local flags = (f[6] == "1" and verify.SNI or 0) + (cas ~= "" and verify.VERIFY or 0)
        config.verify = verify.set(cas, depth, flags, protocols, ciphers)
        config.verify_grpc = verify.set(cas, depth, flags + verify.H2, protocols, ciphers)
    end
    return config
end

-- Sets the variables the upstream's TLS handshake reads; refuses (500) only a
-- verification this NGINX cannot make (ferryman's module not loaded).
function _M.check(config)
    local var = ngx.var
    var.ferryman_egress_cert = config.cert
    var.ferryman_egress_key = config.key
    var.ferryman_egress_name = config.name
    if config.verify then
        local set = var.ferryman_variant == "grpc" and config.verify_grpc or config.verify
        if verify.keep(set) then
            var.ferryman_egress_verify = set.key
        elseif band(set.flags, verify.VERIFY) ~= 0 then
            return ngx.HTTP_INTERNAL_SERVER_ERROR
        end
    end
    return nil
end

return _M
