-- BackendTLSPolicy (ferryman.kinds.gateway.records.backend_tls): a Gateway
-- route's backend spoken to in TLS, its certificate verified per request
-- with the policy's CAs (none: the system's), its hostname sent as SNI and
-- verified, or, with subjectAltNames, one of those verified instead. The
-- verification is ferryman_upstream_verify's (ngx_http_ferryman_verify.c), as
-- egressMTLS verifyServer's: a policy or ConfigMap change is a new W record,
-- never a reload.
-- The Gateway's spec.tls.backend.clientCertificateRef is presented as
-- egressMTLS's certificate is ($ferryman_egress_cert, "data:<PEM>").
-- The U item's last field: <CAs>.<hostname>.<SANs>[.<chain>.<key>], base64
-- each, the SANs "^"-separated base64 of "H<name>" or "U<URI>".

local decode_base64 = ngx.decode_base64
local verify = require("ferryman_upstream_verify")

local _M = {}

-- How deep a backend's chain may be (its CA, intermediates): NGINX's
-- proxy_ssl_verify_depth takes 1 by default; a policy names none.
local DEPTH = 10

function _M.decode(text, upstream)
    if text == nil or text == "" then
        return
    end
    local f = {}
    for field in string.gmatch(text .. ".", "([^.]*)%.") do
        f[#f + 1] = field
    end
    local cas = decode_base64(f[1] or "") or ""
    local sans = {}
    for san in string.gmatch(f[3] or "", "[^^]+") do
        sans[#sans + 1] = decode_base64(san)
    end
    sans = table.concat(sans, "\n")
    local flags = verify.SNI + verify.VERIFY + (sans ~= "" and verify.SANS or 0)
    upstream.tls = true
    local chain = decode_base64(f[4] or "") or ""
    local key = decode_base64(f[5] or "") or ""
    upstream.backend_tls = {
        cert = chain ~= "" and ("data:" .. chain) or "",
        key = key ~= "" and ("data:" .. key) or "",
        name = decode_base64(f[2] or "") or "",
        verify = verify.set(cas, DEPTH, flags, "", "", sans),
        verify_grpc = verify.set(cas, DEPTH, flags + verify.H2, "", "", sans),
    }
end

-- The access phase, once the route chose the upstream: the variables the
-- upstream's handshake reads (the SNI name, the CA set's key). A verification
-- this NGINX cannot make (ferryman's module not loaded) is a 500, never an
-- unverified connection.
function _M.check(config)
    local var = ngx.var
    var.ferryman_egress_name = config.name
    var.ferryman_egress_cert = config.cert
    var.ferryman_egress_key = config.key
    local set = var.ferryman_variant == "grpc" and config.verify_grpc or config.verify
    if not verify.keep(set) then
        return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
    end
    var.ferryman_egress_verify = set.key
end

return _M
