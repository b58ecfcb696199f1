-- The egressMTLS Policy (ferryman.kinds.policy.records.egress_mtls): the client
-- certificate and key NGINX presents to a TLS upstream, and the name it sends
-- as SNI, per request. The slow path's location has
--   proxy_ssl_certificate $ferryman_egress_cert;  (and _key)
--   proxy_ssl_name $ferryman_egress_name;  proxy_ssl_server_name on;
-- NGINX (>= 1.21) reads "data:<PEM>" values as the certificate itself, and an
-- empty one as none; an empty name sends no SNI. So a changed Policy or Secret
-- is a push, never a reload. P item: e|<chain>|<key>|<name>, each base64.

local decode_base64 = ngx.decode_base64

local _M = {}

function _M.decode(f)
    local chain = decode_base64(f[1] or "") or ""
    local key = decode_base64(f[2] or "") or ""
    return {
        cert = chain ~= "" and ("data:" .. chain) or "",
        key = key ~= "" and ("data:" .. key) or "",
        name = decode_base64(f[3] or "") or "",
    }
end

-- Never refuses: sets the variables the upstream's TLS handshake reads.
function _M.check(config)
    local var = ngx.var
    var.ferryman_egress_cert = config.cert
    var.ferryman_egress_key = config.key
    var.ferryman_egress_name = config.name
    return nil
end

return _M
