-- Gateway API routing on the VirtualServer engine: a V record's G items
-- (grammar: ferryman.kinds.gateway.records.routes), taken in the record's order
-- with fall-through, and the HTTPRoute filters ferryman_vs applies to the
-- route it picks (header changes, redirects, rewrites, mirrors).

local upstream_fields = require("ferryman_vs_upstream")
local cors = require("ferryman_gateway_cors")
local cut = require("ferryman_policy").cut

local decode_base64 = ngx.decode_base64
local sub, lower, byte = string.sub, string.lower, string.byte
local regex = require("ferryman_regex")
local SLASH = byte("/")

-- Mirrors per request: the Gateway server declares a location for 1 to this many.
local MAX_MIRRORS = 3
local WELL_KNOWN = { http = "80", https = "443" }

local _M = {}

-- Header changes: { {op, name, value}, ... }, op s(et), a(dd), x (remove).
local function headers_of(text)
    local out = {}
    for _, op in ipairs(cut(text, "^")) do
        local f = cut(op, "~")
        out[#out + 1] = { f[1], decode_base64(f[2]), f[3] and decode_base64(f[3]) or nil }
    end
    return out
end

local function filters_of(text, entry)
    for _, item in ipairs(cut(text, ";")) do
        local letter, payload = sub(item, 1, 1), sub(item, 3)
        local f = cut(payload, "~")
        if letter == "q" then
            entry.request_headers = headers_of(payload)
        elseif letter == "r" then
            entry.response_headers = headers_of(payload)
        elseif letter == "d" then
            entry.redirect = { code = tonumber(f[1]), scheme = decode_base64(f[2]),
                               host = decode_base64(f[3]), port = f[4], path_kind = f[5],
                               path = decode_base64(f[6]) }
        elseif letter == "w" then
            entry.rewrite = { host = decode_base64(f[1]), path_kind = f[2],
                              path = decode_base64(f[3]) }
        elseif letter == "b" or letter == "c" then
            -- A backendRef's own header changes: "<split>@<changes>".
            local at = string.find(payload, "@", 1, true)
            local ops = { tonumber(sub(payload, 1, at - 1)), headers_of(sub(payload, at + 1)) }
            local key = letter == "b" and "backend_request" or "backend_response"
            entry[key] = entry[key] or {}
            entry[key][#entry[key] + 1] = ops
        elseif letter == "t" then
            local seconds = tonumber(payload)
            entry.timeouts = { seconds, seconds, seconds }
        elseif letter == "o" then
            entry.cors = cors.decode(payload)
        elseif letter == "g" then
            -- A GRPCRoute's match: ferryman_vs goes on in @ferryman_grpc.
            entry.grpc = true
        elseif letter == "h" then
            -- The splits whose backends speak h2c (marked below).
            entry.h2c = cut(payload, "^")
        elseif letter == "m" then
            entry.mirrors = {}
            for _, m in ipairs(cut(payload, "^")) do
                local nf = cut(m, "~")
                entry.mirrors[#entry.mirrors + 1] = { tonumber(nf[1]), tonumber(nf[2]) or 100 }
            end
        end
    end
end

-- A condition: "=" equal (case-sensitive), "~" a regular expression.
local function condition_of(text)
    local f = cut(text, ".")
    local var, value = decode_base64(f[1]), decode_base64(f[2])
    if sub(value, 1, 1) == "~" then
        return { var = var, negate = false, regex = sub(value, 2), options = "jo" }
    end
    return { var = var, negate = false, exact = sub(value, 2) }
end

-- One G item (its fields ``f``, split on "|") as a route of ferryman_vs's;
-- ``splits_of`` decodes its splits as a VirtualServer's.
function _M.decode(f, splits_of)
    local path = decode_base64(f[3])
    local entry = { gateway = f[2], path = path, conditions = {}, matches = {},
                    default = splits_of(f[5]) }
    if f[2] == "r" then
        entry.path, entry.options = "^(?:" .. path .. ")$", "jo"
    end
    if f[4] ~= "" then
        for _, c in ipairs(cut(f[4], "&")) do
            entry.conditions[#entry.conditions + 1] = condition_of(c)
        end
    end
    if f[6] and f[6] ~= "" then
        filters_of(f[6], entry)
    end
    -- Each split's action carries its backendRef's header changes.
    for key, field in pairs({ backend_request = "request_headers",
                              backend_response = "response_headers" }) do
        for _, ops in ipairs(entry[key] or {}) do
            local split = entry.default[ops[1]]
            if split then
                split[2]["gateway_" .. field] = ops[2]
            end
        end
        entry[key] = nil
    end
    if entry.h2c then
        -- Their actions go on in @ferryman_h2c, which picks among them alone.
        local splits = {}
        for _, n in ipairs(entry.h2c) do
            local split = entry.default[tonumber(n)]
            if split then
                split[2].h2c = true
                splits[#splits + 1] = split
            end
        end
        entry.h2c = #splits > 0 and splits or nil
    end
    return entry
end

-- The splits a request on ``route`` picks from: in @ferryman_h2c those of
-- its h2c backends (a request there picked one of them already, so each
-- backend keeps its share of the rule's requests).
function _M.splits(route)
    if route.h2c and ngx.var.ferryman_variant == "h2c" then
        return route.h2c
    end
    return route.default
end

-- The first match (in the record's order) whose path and conditions all hold
-- (``holds``: ferryman_vs's check of one condition); nil when none does.
function _M.first(vs, uri, holds)
    for _, e in ipairs(vs.ordered) do
        local kind, path, hit = e.gateway, e.path, false
        if kind == "e" then
            hit = uri == path
        elseif kind == "p" then
            hit = path == "/" or uri == path
                or (sub(uri, 1, #path) == path and byte(uri, #path + 1) == SLASH)
        else
            hit = regex.finds("route", uri, path, e.options)
        end
        if hit then
            for _, c in ipairs(e.conditions) do
                if not holds(c) then
                    hit = false
                    break
                end
            end
            if hit then
                return e
            end
        end
    end
    return nil
end

-- A path with the matched prefix (or the whole path) replaced, as the Gateway
-- API's ReplacePrefixMatch and ReplaceFullPath say.
local function replaced_path(entry, kind, value, uri)
    if kind == "f" then
        return value
    end
    local rest = entry.path == "/" and uri or sub(uri, #entry.path + 1)
    if rest == "" then
        return value
    end
    if sub(value, -1) == "/" then
        value = sub(value, 1, -2)
    end
    return value .. rest
end

-- RequestRedirect: the scheme, host, port and path given, the request's for the rest.
function _M.redirect(entry, uri)
    local d, var = entry.redirect, ngx.var
    local scheme = d.scheme ~= "" and d.scheme or var.scheme
    local host = d.host ~= "" and d.host or var.host
    local port = d.port
    if port == "" then
        -- No port: the scheme's own when the scheme changes, else the listener's.
        -- (Behind the stream block's hop, the PROXY protocol's: the HTTP
        -- listener's own socket is a stream server.)
        local hopped = var.proxy_protocol_server_port
        if hopped == "" then
            hopped = nil
        end
        port = d.scheme ~= "" and WELL_KNOWN[scheme]
            or (hopped or var.ferryman_server_port or var.server_port)
    end
    local authority = (port == WELL_KNOWN[scheme]) and host or (host .. ":" .. port)
    local path = uri
    if d.path_kind ~= "" then
        path = replaced_path(entry, d.path_kind, d.path, uri)
    end
    local args = var.args
    local url = scheme .. "://" .. authority .. path .. (args and args ~= "" and ("?" .. args) or "")
    return ngx.redirect(url, d.code)
end

-- CORS: a preflight is answered here; returns for any other request.
function _M.preflight(entry)
    return cors.preflight(entry.cors)
end

-- RequestMirror: the same route goes on in a location that also sends a copy
-- of the request to each upstream chosen by its percentage (nginx.conf.tmpl's
-- Gateway server); returns only when none is.
function _M.mirror(route, vs)
    local var, n = ngx.var, 0
    if var.ferryman_variant == "h2c" then
        -- The copies were chosen before (@ferryman_h2c_mirror_<n> sends them).
        return
    end
    for _, m in ipairs(route.mirrors) do
        local upstream = vs.upstreams[m[1]]
        if upstream and n < MAX_MIRRORS and (m[2] >= 100 or math.random() * 100 < m[2]) then
            n = n + 1
            var["ferryman_mirror_" .. n] = upstream.key
        end
    end
    if n > 0 then
        return ngx.exec("@ferryman_mirror_" .. n)
    end
end

-- RequestHeaderModifier: set, add or remove the request's headers.
local function request_headers(ops)
    local current = nil
    for _, op in ipairs(ops) do
        local kind, name, value = op[1], op[2], op[3]
        if kind == "s" then
            upstream_fields.set_header(name, value)
        elseif kind == "x" then
            upstream_fields.remove_header(name)
        else
            current = current or ngx.req.get_headers(0, true)
            local had = current[name] or current[lower(name)]
            if had == nil then
                upstream_fields.set_header(name, value)
            else
                local values = type(had) == "table" and had or { had }
                values[#values + 1] = value
                ngx.req.set_header(name, values)
            end
        end
    end
end

-- The filters of a route that proxies to ``action`` (the split picked):
-- the rule's request headers, then its backendRef's, URLRewrite, timeouts,
-- and the response header changes the header filter applies (``none``:
-- ferryman_vs's empty list).
function _M.apply(route, action, uri, none)
    local var = ngx.var
    if action.h2c and var.ferryman_variant ~= "h2c" then
        -- An h2c backend: HTTP/2 by grpc_pass (grpc-locations.conf.tmpl),
        -- before any header changes (that location applies them); from
        -- @ferryman_mirror_<n>, to the h2c location sending the same copies.
        local n = 0
        while n < MAX_MIRRORS and var.ferryman_variant == "mirror"
            and (var["ferryman_mirror_" .. (n + 1)] or "") ~= "" do
            n = n + 1
        end
        return ngx.exec(n > 0 and "@ferryman_h2c_mirror_" .. n or "@ferryman_h2c")
    end
    if route.request_headers then
        request_headers(route.request_headers)
    end
    if action.gateway_request_headers then
        request_headers(action.gateway_request_headers)
    end
    local w = route.rewrite
    if w then
        if w.host ~= "" then
            upstream_fields.set_header("Host", w.host)
        end
        if w.path_kind ~= "" then
            ngx.req.set_uri(replaced_path(route, w.path_kind, w.path, uri), false)
        end
    end
    local ctx = ngx.ctx
    if route.timeouts then
        ctx.ferryman_timeouts = route.timeouts
    end
    -- CORS headers first, so the rule's and the backendRef's header changes
    -- (in that order) have the last word.
    local response = nil
    for _, ops in ipairs({ route.cors and cors.response(route.cors) or false,
                           route.response_headers or false,
                           action.gateway_response_headers or false }) do
        if ops then
            if response == nil then
                response = ops
            else
                local both = {}
                for _, op in ipairs(response) do
                    both[#both + 1] = op
                end
                for _, op in ipairs(ops) do
                    both[#both + 1] = op
                end
                response = both
            end
        end
    end
    if response then
        ctx.ferryman_response = { add = none, hide = none, gateway = response }
    end
end

-- ResponseHeaderModifier, whatever the status.
function _M.response_headers(ops)
    for _, op in ipairs(ops) do
        local kind, name, value = op[1], op[2], op[3]
        if kind == "s" then
            ngx.header[name] = value
        elseif kind == "x" then
            ngx.header[name] = nil
        else
            local had = ngx.header[name]
            if had == nil then
                ngx.header[name] = value
            else
                local values = type(had) == "table" and had or { had }
                values[#values + 1] = value
                ngx.header[name] = values
            end
        end
    end
end

return _M
