-- The externalAuth Policy: NGINX's auth_request, asked per request
-- (kinds/policy/records/external.py says why this way). P item:
-- x|<backend key>|<authURI, base64>|<ssl 0|1>|<signin, base64, or ->|
-- <redirect param>|<response headers, ","-separated, or ->, and with sslVerify
-- |<CAs, base64, or -: the system's>|<sslVerifyDepth>|<name, base64>: the
-- subrequest's upstream verifies the service's certificate
-- (ferryman_upstream_verify.lua), the name sent as SNI.
--
-- The subrequest goes to nginx.conf's internal location AUTH_LOCATION, whose
-- proxy_pass is $ferryman_auth_url ("http(s)://ferryman_backend<authURI>");
-- the balancer of ferryman_backend picks the peer from the ctx handed to the
-- subrequest, as for any VirtualServer upstream. ferryman.lua fills in
-- peers_for (the Service's endpoints) and release (the in-flight count of the
-- peer tried, which a subrequest's own log phase would never undo).

local decode_base64 = ngx.decode_base64
local capture = ngx.location.capture
local escape_uri = ngx.escape_uri
local upstream_fields = require("ferryman_vs_upstream")
local upstream_verify = require("ferryman_upstream_verify")

local AUTH_LOCATION = "/_ferryman/external-auth"

local _M = {}

-- The variables a sign-in URL may name (${name} in the P item), as NGINX has
-- them; escaped_request_uri is ingress-nginx's set_escape_uri of request_uri.
local function variable(name)
    local var = ngx.var
    if name == "escaped_request_uri" then
        return escape_uri(var.request_uri)
    elseif name == "pass_access_scheme" then
        return var.scheme
    elseif name == "http_host" then
        return var.http_host or var.host
    elseif name == "host" or name == "scheme" or name == "request_uri" then
        return var[name]
    end
    return ""
end

-- ingress-nginx's auth-signin: the URL with
-- <param>=<scheme>://<host><escaped request URI> added, unless it names
-- the parameter itself ("-").
local function signin_location(config)
    local url = string.gsub(config.signin, "%${([%w_]+)}", variable)
    local param = config.redirect_param
    if param == "-" then
        return url
    end
    local sep = string.find(url, "?", 1, true) and "&" or "?"
    return url .. sep .. param .. "=" .. variable("scheme") .. "://" .. variable("http_host")
        .. variable("escaped_request_uri")
end

function _M.decode(f)
    local ssl = f[3] == "1"
    local headers = {}
    if f[6] and f[6] ~= "-" then
        for name in string.gmatch(f[6], "[^,]+") do
            headers[#headers + 1] = name
        end
    end
    local verify, name = nil, ""
    if f[7] then
        local cas = f[7] ~= "-" and (decode_base64(f[7]) or "") or ""
        local flags = upstream_verify.VERIFY + upstream_verify.SNI
        verify = upstream_verify.set(cas, tonumber(f[8]) or 1, flags)
        name = decode_base64(f[9] or "") or ""
    end
    return {
        verify = verify,
        name = name,
        signin = (f[4] and f[4] ~= "-") and decode_base64(f[4]) or nil,
        redirect_param = f[5] or "rd",
        headers = headers,
        key = f[1],
        -- Verified: to the upstream that keeps no connection (its pool would
        -- hand a verified connection to an unverified request, and back).
        url = (ssl and "https" or "http") .. "://ferryman_backend" .. (verify and "_mtls" or "")
            .. decode_base64(f[2]),
        -- The upstream settings the balancer reads: NIC's auth upstream has
        -- NGINX's defaults but ferryman's max_fails and fail_timeout.
        host = { key = f[1], max_fails = 1, fail_timeout = 10, tries = 0 },
    }
end

function _M.check(config)
    local peers = _M.peers_for(config.key)
    if #peers == 0 then
        -- auth_request: the subrequest's 502 (no live upstream) is a 500.
        return ngx.HTTP_INTERNAL_SERVER_ERROR
    end
    local ctx = { ferryman_peers = peers, ferryman_host = config.host }
    local vars = { ferryman_auth_url = config.url }
    if config.verify then
        if not upstream_verify.keep(config.verify) then
            return ngx.HTTP_INTERNAL_SERVER_ERROR
        end
        vars.ferryman_egress_verify = config.verify.key
        vars.ferryman_auth_name = config.name
    end
    -- auth_request's subrequest: GET, the client's headers, no body.
    local res = capture(AUTH_LOCATION, {
        method = ngx.HTTP_GET,
        ctx = ctx,
        vars = vars,
    })
    _M.release(ctx)
    local status = res.status
    if status >= 200 and status < 300 then
        -- The named headers as the auth service answered them, whatever the
        -- client sent under those names.
        for _, name in ipairs(config.headers) do
            local value = res.header[name]
            if type(value) == "table" then
                value = value[1]
            end
            if value then
                upstream_fields.set_header(name, value)
            else
                upstream_fields.remove_header(name)
            end
        end
        return nil
    end
    if status == ngx.HTTP_UNAUTHORIZED and config.signin then
        ngx.header["Location"] = signin_location(config)
        return ngx.HTTP_MOVED_TEMPORARILY
    end
    if status == ngx.HTTP_UNAUTHORIZED then
        local challenge = res.header["WWW-Authenticate"]
        if challenge then
            ngx.header["WWW-Authenticate"] = challenge
        end
        return status
    end
    if status == ngx.HTTP_FORBIDDEN then
        return status
    end
    return ngx.HTTP_INTERNAL_SERVER_ERROR
end

return _M
