-- The externalAuth Policy: NGINX's auth_request, asked per request
-- (kinds/policy/records/external.py says why this way). P item:
-- x|<backend key>|<authURI, base64>|<ssl 0|1>|<signin, base64, or ->|
-- <redirect param>|<response headers, ","-separated, or ->, and with sslVerify
-- |<CAs, base64, or -: the system's>|<sslVerifyDepth>|<name, base64>: the
-- subrequest's upstream verifies the service's certificate
-- (ferryman_upstream_verify.lua), the name sent as SNI (three empty fields
-- without), then for ingress-nginx's auth-url |<X-Auth-Request-Redirect,
-- base64>|<success|always>|<cache key, base64, or ->|<cache times or ->|
-- <Host, base64, or -> (kinds/policy/records/external.py).
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
local cache = ngx.shared.ferryman_auth_cache
local gsub, find, match = string.gsub, string.find, string.match
local md5 = ngx.md5

-- add_header's statuses: the auth service's Set-Cookie reaches a response of
-- these by default (ingress-nginx's add_header Set-Cookie $auth_cookie).
local COOKIE_STATUSES = {
    [200] = true, [201] = true, [204] = true, [206] = true, [301] = true,
    [302] = true, [303] = true, [304] = true, [307] = true, [308] = true,
}

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
    if f[7] and f[7] ~= "" then
        local cas = f[7] ~= "-" and (decode_base64(f[7]) or "") or ""
        local flags = upstream_verify.VERIFY + upstream_verify.SNI
        verify = upstream_verify.set(cas, tonumber(f[8]) or 1, flags)
        name = decode_base64(f[9] or "") or ""
    end
    local times = nil
    if f[13] and f[13] ~= "-" then
        times = {}
        for codes, ttl in string.gmatch(f[13], "([^=;]+)=(%d+)") do
            local entry = { ttl = tonumber(ttl), codes = {} }
            if codes == "*" then
                entry.any = true
            else
                for code in string.gmatch(codes, "%d+") do
                    entry.codes[tonumber(code)] = true
                end
            end
            times[#times + 1] = entry
        end
    end
    return {
        -- ingress-nginx's auth-url (nil for a Policy's item).
        redirect = f[10] and decode_base64(f[10]) or nil,
        always_cookie = f[11] == "always",
        pass_cookie = f[11] ~= nil,
        -- ingress-nginx's auth location tells the service the original
        -- request (X-Original-URL, X-Original-Method, X-Sent-From), which
        -- auth-request services such as Authelia and authentik read.
        tells_original = f[11] ~= nil,
        cache_key = (f[12] and f[12] ~= "-") and decode_base64(f[12]) or nil,
        cache_times = times,
        -- ingress-nginx's Host: the auth URL's (nil: the client's, NIC's).
        auth_host = (f[14] and f[14] ~= "-") and decode_base64(f[14]) or nil,
        -- One key space per auth configuration (and host, in cache_key_of).
        space = md5(table.concat(f, "|")),
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

local function fill(text)
    return (gsub(text, "%${([%w_]+)}", function(n)
        return ngx.var[n] or ""
    end))
end

local function cache_key_of(config)
    if not config.cache_key then
        return nil
    end
    return md5(config.space .. "\n" .. (ngx.var.host or "") .. "\n" .. fill(config.cache_key))
end

-- How long an answer is kept: the first auth-cache-duration entry naming its
-- status; as proxy_cache, never one with Set-Cookie or that Cache-Control
-- forbids, and Cache-Control's max-age wins.
local function ttl_of(config, status, header)
    if header["Set-Cookie"] then
        return nil
    end
    local control = header["Cache-Control"]
    if type(control) == "table" then
        control = table.concat(control, ",")
    end
    if control then
        control = string.lower(control)
        if find(control, "no-cache", 1, true) or find(control, "no-store", 1, true)
            or find(control, "private", 1, true) then
            return nil
        end
        local age = match(control, "max%-age=(%d+)")
        if age then
            return tonumber(age) > 0 and tonumber(age) or nil
        end
    end
    for _, entry in ipairs(config.cache_times or {}) do
        if entry.any or entry.codes[status] then
            return entry.ttl
        end
    end
    return nil
end

local function first(value)
    if type(value) == "table" then
        return value[1]
    end
    return value
end

-- The answer as kept: its status, then a "name:value" line for each header
-- the request's outcome reads.
local function kept(config, status, header)
    local lines = { tostring(status) }
    local challenge = first(header["WWW-Authenticate"])
    if challenge then
        lines[#lines + 1] = "WWW-Authenticate:" .. challenge
    end
    for _, name in ipairs(config.headers) do
        local value = first(header[name])
        if value then
            lines[#lines + 1] = name .. ":" .. value
        end
    end
    return table.concat(lines, "\n")
end

local function unkept(text)
    local header = {}
    local status = nil
    for line in string.gmatch(text, "[^\n]+") do
        if status == nil then
            status = tonumber(line)
        else
            local at = find(line, ":", 1, true)
            if at then
                header[string.sub(line, 1, at - 1)] = string.sub(line, at + 1)
            end
        end
    end
    return status, header
end

-- The request's outcome for the auth service's answer (fresh or kept).
local function outcome(config, status, header)
    local cookie = config.pass_cookie and header["Set-Cookie"] or nil
    local passed = status >= 200 and status < 300
        or (config.always_cookie and (status == 401 or status == 403))
    -- (auth_request_set reads no other answer: a 5xx is the client's 500 alone.)
    if cookie and passed then
        -- ferryman_filters adds them once the response's status is known.
        ngx.ctx.ferryman_auth_cookies = { values = cookie, always = config.always_cookie }
    end
    if status >= 200 and status < 300 then
        -- The named headers as the auth service answered them, whatever the
        -- client sent under those names.
        for _, name in ipairs(config.headers) do
            local value = first(header[name])
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
        local challenge = first(header["WWW-Authenticate"])
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

function _M.check(config)
    local key = cache_key_of(config)
    if key then
        local text = cache:get(key)
        if text then
            local status, header = unkept(text)
            return outcome(config, status, header)
        end
    end
    local peers = _M.peers_for(config.key)
    if #peers == 0 then
        -- auth_request: the subrequest's 502 (no live upstream) is a 500.
        return ngx.HTTP_INTERNAL_SERVER_ERROR
    end
    local ctx = { ferryman_peers = peers, ferryman_host = config.host }
    local vars = {
        ferryman_auth_url = config.url,
        ferryman_auth_host = config.auth_host or ngx.var.host,
        ferryman_auth_redirect = config.redirect and fill(config.redirect)
            or (ngx.var.http_x_auth_request_redirect or ""),
    }
    if config.tells_original then
        local var = ngx.var
        vars.ferryman_auth_original_url = var.scheme .. "://" .. (var.http_host or var.host)
            .. var.request_uri
        vars.ferryman_auth_original_method = var.request_method
        vars.ferryman_auth_sent_from = "nginx-ingress-controller"
    end
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
    if key then
        local ttl = ttl_of(config, status, res.header)
        if ttl then
            cache:set(key, kept(config, status, res.header), ttl)
        end
    end
    return outcome(config, status, res.header)
end

-- In the header filter: the auth service's Set-Cookie, on a response of
-- add_header's statuses (auth-always-set-cookie: any).
function _M.header_filter(cookies)
    if not cookies.always and not COOKIE_STATUSES[ngx.status] then
        return
    end
    local values = type(cookies.values) == "table" and cookies.values or { cookies.values }
    local had = ngx.header["Set-Cookie"]
    local out = type(had) == "table" and had or { had }
    for _, value in ipairs(values) do
        out[#out + 1] = value
    end
    ngx.header["Set-Cookie"] = out
end

return _M
