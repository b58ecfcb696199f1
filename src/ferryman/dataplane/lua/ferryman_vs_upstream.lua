-- A VirtualServer upstream's fields and a proxy action's header fields that
-- NIC writes as NGINX directives, done per request instead (what each field
-- becomes, and which cannot: ferryman.kinds.virtualserver.records.upstream and vs_response).
-- ferryman_vs.lua decodes and routes; this module is called at the points
-- where NGINX would apply the directive.

local find, lower, gsub = string.find, string.lower, string.gsub
local decode_base64 = ngx.decode_base64
local gateway_tls = require("ferryman_gateway_tls")

local counters = ngx.shared.ferryman_balancer

local _M = {}

-- The ConfigMap's client_max_body_size in bytes (0: none), the limit of a
-- route that sets none. nginx.conf's "location /" takes any body, so that a
-- route may allow more than the server does: the fast path hands a body
-- above this (or one without a length) to the slow path, which checks it here.
local default_body_limit = 1024 * 1024

function _M.configure(body_limit)
    default_body_limit = body_limit
end

-- NGINX's NGX_BUSY from a balancer: "no live upstreams", answered 502 (a
-- status code from balancer_by_lua would be a 500 on this NGINX).
_M.NO_LIVE_UPSTREAMS = -3

-- The U record's last field: <tls>.<max_conns>.<body>.<next_timeout>.<keepalive>,
-- then [.<fallback>[.<error codes>.<ingress>]].
function _M.decode(text, upstream)
    if text == nil or text == "" then
        return
    end
    local f, start = {}, 1
    while true do
        local at = find(text, ".", start, true)
        f[#f + 1] = string.sub(text, start, at and at - 1 or nil)
        if at == nil then
            break
        end
        start = at + 1
    end
    upstream.tls = f[1] == "1"
    upstream.max_conns = tonumber(f[2])
    upstream.body_max = tonumber(f[3])
    local timeout = tonumber(f[4])
    upstream.next_timeout = timeout and timeout / 1000
    upstream.keepalive = tonumber(f[5])
    -- ingress-nginx's default-backend: the backend key serving while this
    -- upstream's endpoint set is empty (ferryman.lua's proxy_to).
    upstream.fallback = f[6] and f[6] ~= "" and decode_base64(f[6]) or nil
    -- ingress-nginx's custom-http-errors: the codes the fallback answers
    -- ("404,503") and the Ingress's name (ferryman_custom_errors).
    if upstream.fallback and f[7] and f[7] ~= "" then
        upstream.error_codes = f[7]
        upstream.error_ingress = decode_base64(f[8] or "") or ""
    end
end

-- "^"-separated base64 names as a list, nil when empty.
function _M.names(text)
    if text == nil or text == "" then
        return nil
    end
    local out = {}
    for name in string.gmatch(text, "[^^]+") do
        out[#out + 1] = decode_base64(name)
    end
    return out
end

-- Request headers ferryman's own proxy configuration sets (vs-request-headers.conf.tmpl):
-- a VirtualServer's requestHeaders.set replaces them through these variables.
local OWN_HEADERS = {
    ["host"] = "ferryman_h_host",
    ["connection"] = "ferryman_h_connection",
    ["upgrade"] = "ferryman_h_upgrade",
    ["x-real-ip"] = "ferryman_h_x_real_ip",
    ["x-forwarded-for"] = "ferryman_h_x_forwarded_for",
    ["x-forwarded-host"] = "ferryman_h_x_forwarded_host",
    ["x-forwarded-port"] = "ferryman_h_x_forwarded_port",
    ["x-forwarded-proto"] = "ferryman_h_x_forwarded_proto",
    ["proxy"] = "ferryman_h_proxy",
    ["forwarded"] = "ferryman_h_forwarded",
    ["x-original-url"] = "ferryman_h_x_original_url",
    ["x-rewrite-url"] = "ferryman_h_x_rewrite_url",
    ["http2-settings"] = "ferryman_h_http2_settings",
}

-- NIC's proxy_set_header: the value replaces the client's header, or the one
-- ferryman sets (an empty value: not sent, as proxy_set_header does), under
-- the name as written: set_header alone would keep the client's spelling.
function _M.set_header(name, value)
    local own = OWN_HEADERS[lower(name)]
    if own then
        ngx.var[own] = value
    else
        ngx.req.clear_header(name)
        ngx.req.set_header(name, value)
    end
end

-- Removes a request header before it is proxied: for the headers ferryman
-- sets itself, an empty value (proxy_set_header then sends none).
function _M.remove_header(name)
    local own = OWN_HEADERS[lower(name)]
    if own then
        ngx.var[own] = ""
    else
        ngx.req.clear_header(name)
    end
end

-- The length of the request body once read (in memory or in a file).
local function body_length()
    ngx.req.read_body()
    local data = ngx.req.get_body_data()
    if data then
        return #data
    end
    local path = ngx.req.get_body_file()
    if path == nil then
        return 0
    end
    local file = io.open(path, "rb")
    if file == nil then
        return 0
    end
    local size = file:seek("end")
    file:close()
    return size or 0
end

-- NGINX's 413 for a body above ``limit`` (0: no limit; nil: the server's)
-- when the length says so. A body without a length is read (as proxy_request_buffering would) and
-- measured when the limit is below the server's: above the server's it is
-- the slow path location's client_max_body_size (the server's) that refuses
-- it while reading.
function _M.check_body(limit)
    limit = limit or default_body_limit
    if limit == 0 then
        return
    end
    local var = ngx.var
    local length = tonumber(var.content_length)
    if length == nil and limit < default_body_limit and var.http_transfer_encoding then
        length = body_length()
    end
    if length and length > limit then
        return ngx.exit(413) -- NGINX's "Request Entity Too Large"
    end
end

-- The access phase, once the route chose the upstream: NIC's
-- client_max_body_size (413), keepalive 0 (Connection: close unless an
-- upgrade, NIC's $vs_connection_header), tls.enable (proxy_pass https://, to
-- an upstream of its own: kept TLS connections never serve a plain request;
-- with an egressMTLS certificate, to one that keeps none).
function _M.on_route(upstream)
    local var = ngx.var
    _M.check_body(upstream.body_max)
    if upstream.keepalive == 0 and var.ferryman_h_connection == "" then
        var.ferryman_h_connection = "close"
    end
    if upstream.backend_tls then
        -- A BackendTLSPolicy's: its SNI name and CA set (ferryman_gateway_tls).
        gateway_tls.check(upstream.backend_tls)
    end
    if upstream.tls then
        -- A connection opened with an egressMTLS client certificate is never
        -- kept: NGINX's pool is per peer address, so it would carry the next
        -- request to that peer, whatever certificate that one's route names.
        -- In @ferryman_grpc: grpcs:// to the gRPC pools (HTTP/2 connections).
        -- Nor one with a TLS context of its own (verifyServer, protocols,
        -- ciphers): the pool would hand a connection verified against one
        -- Policy's CAs (or none) to another's request.
        local mtls = var.ferryman_egress_cert ~= "" or var.ferryman_egress_verify ~= ""
        if var.ferryman_variant == "grpc" then
            var.ferryman_upstream_target = mtls and "grpcs://ferryman_grpc_mtls"
                or "grpcs://ferryman_grpc_tls"
        else
            var.ferryman_upstream_target = mtls and "https://ferryman_backend_mtls"
                or "https://ferryman_backend_tls"
        end
    end
end

-- The peers a max-conns upstream may not use now: those with that many
-- requests in flight (NGINX's max_conns; across workers, as NIC's upstream
-- zone counts), added to the tried ones; nil when the upstream has no limit.
function _M.excluded(upstream, peers, tried)
    local limit = upstream.max_conns
    if limit == nil then
        return nil
    end
    local out = {}
    for id in pairs(tried) do
        out[id] = true
    end
    for _, peer in ipairs(peers) do
        if (counters:get(peer[5]) or 0) >= limit then
            out[peer[3]] = true
        end
    end
    return out
end

-- NGINX's proxy_next_upstream_timeout: no next attempt once that long has
-- passed since the first. NGINX answers as the last failure would (502, or
-- 504 after a timeout); from the balancer the answer can only be 502.
function _M.too_late(upstream, ctx)
    local timeout = upstream.next_timeout
    if timeout == nil then
        return nil
    end
    local started = ctx.ferryman_started
    if started == nil then
        ctx.ferryman_started = ngx.now()
        return nil
    end
    ngx.update_time()
    return ngx.now() - started >= timeout
end

-- The header filter of a proxied response: responseHeaders.pass (NGINX
-- hides Date, Server, X-Pad and X-Accel-* unless proxy_pass_header) and
-- .ignore of X-Accel-Limit-Rate (the rate it set undone; the other ignorable
-- headers: ferryman.kinds.virtualserver.records.response).
function _M.header_filter(passed, ignore_rate)
    local var = ngx.var
    if var.upstream_status == nil then
        return
    end
    if passed then
        for _, name in ipairs(passed) do
            local value = var["upstream_http_" .. gsub(lower(name), "-", "_")]
            if value then
                ngx.header[name] = value
            end
        end
    end
    if ignore_rate and var.upstream_http_x_accel_limit_rate then
        var.limit_rate = 0
    end
end

return _M
