-- VirtualServer routing (k8s.nginx.org/v1), per request, from the V record of
-- the host (grammar: ferryman.kinds.virtualserver.records.virtualserver; the location choice and
-- the match conditions: ferryman.kinds.virtualserver.records.locations, the reference this
-- follows). ferryman.lua's slow path calls in here for hosts that have a V
-- record: Lua's fast path never routes them (their H record is a stub without
-- routes); the module routes those of their routes the F record gives it
-- (ferryman.kinds.virtualserver.records.fast) and hands the others, and requests no route
-- takes, to the slow path.

local policies = require("ferryman_policy")
local gateway_tls = require("ferryman_gateway_tls")

local decode_base64 = ngx.decode_base64
local find, sub, lower, gsub, byte = string.find, string.sub, string.lower, string.gsub, string.byte
local match = string.match
local SLASH = string.byte("/")
local regex = require("ferryman_regex")
local upstream_fields = require("ferryman_vs_upstream")
local gateway_routes = require("ferryman_gateway_routes")
local proxy_redirect = require("ferryman_proxy_redirect")
local sticky = require("ferryman_sticky")

local _M = {}

local cut = policies.cut

-- "<name>~<value>^..." as { { name, value }, ... }, nil when empty.
local function headers_of(text)
    if text == nil or text == "" then
        return nil
    end
    local headers = {}
    for _, h in ipairs(cut(text, "^")) do
        local nv = cut(h, "~")
        headers[#headers + 1] = { decode_base64(nv[1]), decode_base64(nv[2]), nv[3] == "1" }
    end
    return headers
end

local function action_of(text)
    local f = cut(text, ".")
    if f[1] == "p" then
        local rewrite = f[3] and f[3] ~= "" and decode_base64(f[3]) or nil
        local response = nil
        local add, hide = headers_of(f[5]), f[6] and f[6] ~= "" and cut(f[6], "^") or nil
        local passed, ignored = upstream_fields.names(f[8]), upstream_fields.names(f[9])
        local ignore_rate = false
        for _, name in ipairs(ignored or {}) do
            ignore_rate = ignore_rate or lower(name) == "x-accel-limit-rate"
        end
        local redirect = proxy_redirect.decode(f[10]) -- an Ingress's proxy-redirect-*
        if add or hide or passed or ignore_rate or redirect then
            response = { add = add or {}, hide = {}, passed = passed, ignore_rate = ignore_rate,
                         redirect = redirect }
            for _, name in ipairs(hide or {}) do
                response.hide[#response.hide + 1] = decode_base64(name)
            end
        end
        return {
            kind = "pass",
            upstream = tonumber(f[2]),
            rewrite = rewrite,
            set_headers = headers_of(f[4]),
            response = response,
            drop_headers = f[7] == "1",
        }
    elseif f[1] == "d" then
        return { kind = "redirect", code = tonumber(f[2]), url = decode_base64(f[3]) }
    end
    local headers = headers_of(f[5]) or {}
    return {
        kind = "return",
        code = tonumber(f[2]),
        type = decode_base64(f[3]),
        body = decode_base64(f[4]),
        headers = headers,
    }
end

local function splits_of(text)
    local out = {}
    for _, s in ipairs(cut(text, ",")) do
        local colon = find(s, ":", 1, true)
        out[#out + 1] = { tonumber(sub(s, 1, colon - 1)), action_of(sub(s, colon + 1)) }
    end
    return out
end

local function condition_of(text)
    local f = cut(text, ".")
    local var, value = decode_base64(f[1]), decode_base64(f[2])
    local c = { var = var, negate = false }
    if sub(value, 1, 1) == "!" then
        c.negate = true
        value = sub(value, 2)
    end
    if sub(value, 1, 2) == "~*" then
        c.regex, c.options = sub(value, 3), "ijo"
    elseif sub(value, 1, 1) == "~" then
        c.regex, c.options = sub(value, 2), "jo"
    else
        if sub(value, 1, 1) == "\\" then
            value = sub(value, 2)
        end
        c.value = lower(value)
    end
    return c
end

local function number_or_nil(text)
    local n = tonumber(text)
    if n == nil or n <= 0 then
        return nil
    end
    return n
end

local MODIFIERS = { E = "=", N = "^~", P = "", X = "~", I = "~*" }

-- The V record as a table: redirect, upstreams, and routes by kind.
function _M.decode(raw)
    local items = cut(raw, " ")
    local vs = { upstreams = {}, exact = {}, prefixes = {}, regexes = {}, proxying = {} }
    -- P items (policy configurations) and who names them, resolved at the end.
    local policy_items, named = {}, {}
    local code, based = string.match(items[1], "^(%d+):(%a)$")
    if code then
        -- "i": an Ingress's redirect-to-https, only when X-Forwarded-Proto is http.
        -- "t": an Ingress's ingress-nginx force-ssl-redirect, by the scheme,
        -- the request URI's trailing slash dropped (preserve-trailing-slash
        -- keeps it: "s").
        vs.redirect = { tonumber(code), based == "x", based == "i", based == "t" }
    end
    for i = 2, #items do
        local f = cut(items[i], "|")
        if f[1] == "U" then
            local connect, read, send = number_or_nil(f[6]), number_or_nil(f[7]), number_or_nil(f[8])
            vs.upstreams[#vs.upstreams + 1] = {
                key = f[2],
                least_conn = f[3] == "lc",
                random = (f[3] == "r" and 1) or (f[3] == "r2" and 2) or nil,
                hash = (f[3] == "ip" or f[3] == "h" or f[3] == "hc") and f[3] or nil,
                hash_key = f[10] and f[10] ~= "" and decode_base64(f[10]) or nil,
                max_fails = tonumber(f[4]) or 1,
                fail_timeout = tonumber(f[5]) or 10,
                timeouts = (connect or read or send) and { connect, send, read } or nil,
                tries = tonumber(f[9]) or 0,
            }
            upstream_fields.decode(f[11], vs.upstreams[#vs.upstreams])
            sticky.decode(f[12], vs.upstreams[#vs.upstreams]) -- sticky cookie, if any
            gateway_tls.decode(f[13], vs.upstreams[#vs.upstreams]) -- BackendTLSPolicy
        elseif f[1] == "R" then
            local route = {
                modifier = MODIFIERS[f[2]],
                path = decode_base64(f[3]),
                matches = {},
                default = splits_of(f[6]),
            }
            if f[5] ~= "" then
                for _, m in ipairs(cut(f[5], ";")) do
                    local gt = find(m, ">", 1, true)
                    local conditions = {}
                    for _, c in ipairs(cut(sub(m, 1, gt - 1), "&")) do
                        conditions[#conditions + 1] = condition_of(c)
                    end
                    route.matches[#route.matches + 1] = { conditions, splits_of(sub(m, gt + 1)) }
                end
            end
            if f[7] and f[7] ~= "" then
                route.errors = {}
                for _, page in ipairs(cut(f[7], ";")) do
                    local gt = find(page, ">", 1, true)
                    local response = action_of(sub(page, gt + 1))
                    for _, code in ipairs(cut(sub(page, 1, gt - 1), ":")) do
                        route.errors[tonumber(code)] = response
                    end
                end
            end
            -- The route's flags: "u" an Ingress route with nginx.org/proxy-buffering:
            -- false (ingress_vs), "g" gRPC (ferryman.kinds.virtualserver.records.virtualserver),
            -- "b<kib>" a buffer tier (ferryman.configs.buffer_tiers).
            local flags = f[9] or ""
            route.unbuffered = find(flags, "u", 1, true) ~= nil
            route.grpc = find(flags, "g", 1, true) ~= nil
            -- "i": the rewrite matches the path caseless (an Ingress's
            -- ingress-nginx rewrite-target: rewrite "(?i)<path>").
            route.caseless = find(flags, "i", 1, true) ~= nil
            -- "w": the URI becomes the rewrite (rewrite-target on a plain path,
            -- whose pattern matches every URI the location takes; no groups).
            route.whole = find(flags, "w", 1, true) ~= nil
            -- The slow path's location of a buffered/unbuffered, tiered route,
            -- "s" with the request body streamed (ingress-nginx's
            -- proxy-request-buffering: off): nginx.conf.tmpl's
            -- @ferryman_<variant> (configs/buffer_tiers.py); nil: this one.
            local tier = match(flags, "b(%d+)")
            local variant = route.unbuffered and "unbuffered" or nil
            if tier then
                variant = (variant and variant .. "_" or "") .. "b" .. tier
            end
            if find(flags, "s", 1, true) then
                variant = "streamed" .. (variant and "_" .. variant or "")
            end
            if variant and not route.grpc then
                route.variant = variant
                route.location = "@ferryman_" .. variant
            end
            local modifier = route.modifier
            if modifier == "=" then
                vs.exact[route.path] = route
            elseif modifier == "~" or modifier == "~*" then
                route.options = modifier == "~*" and "ijo" or "jo"
                vs.regexes[#vs.regexes + 1] = route
            else
                vs.prefixes[route.path] = route
            end
            if f[4] == "1" then
                vs.proxying[route.path] = route
            end
            named[route] = f[8]
        elseif f[1] == "G" then
            -- Gateway API matches, taken in order (ferryman_gateway_routes).
            vs.ordered = vs.ordered or {}
            vs.ordered[#vs.ordered + 1] = gateway_routes.decode(f, splits_of)
        elseif f[1] == "P" then
            policy_items[#policy_items + 1] = policies.decode(f)
        elseif f[1] == "S" then
            named[vs] = f[2]
        elseif f[1] == "O" then
            -- An Ingress host's options (ferryman.kinds.ingress.records.as_virtualserver).
            vs.options = {
                hsts = f[2] ~= "" and decode_base64(f[2]) or nil,
                hsts_behind_proxy = f[3] == "1",
                server_tokens = f[4] == "1",
            }
        end
    end
    for owner, text in pairs(named) do
        owner.policies = policies.set_of(text, policy_items)
    end
    return vs
end

-- NGINX's location choice (vs_routes.find_location): the route, and whether
-- to answer 301 to its name instead (auto_redirect).
local function find_route(vs, uri)
    local route = vs.exact[uri]
    if route then
        return route
    end
    local longest = vs.prefixes[uri]
    if longest == nil then
        local redirect = vs.proxying[uri .. "/"]
        if redirect then
            return redirect, true
        end
        for i = #uri - 1, 1, -1 do
            longest = vs.prefixes[sub(uri, 1, i)]
            if longest then
                break
            end
        end
    end
    if longest and longest.modifier == "^~" then
        return longest
    end
    for _, r in ipairs(vs.regexes) do
        if regex.finds("route", uri, r.path, r.options) then
            return r
        end
    end
    return longest
end

local function holds(c)
    local actual = ngx.var[c.var] or ""
    local found
    if c.exact then
        found = actual == c.exact
    elseif c.regex then
        found = actual ~= "" and regex.finds("condition", actual, c.regex, c.options)
    else
        found = lower(actual) == c.value
    end
    return found ~= c.negate
end

local seeded = false
local NONE = {}

-- Kept when a proxy drops the client's headers (requestHeaders.pass: false).
local KEPT_HEADERS = { ["host"] = true, ["content-length"] = true, ["transfer-encoding"] = true }

local function pick(splits)
    if #splits == 1 then
        return splits[1][2]
    end
    -- Weights out of their sum: 100 for a VirtualServer, any for an HTTPRoute.
    local sum = 0
    for _, s in ipairs(splits) do
        sum = sum + s[1]
    end
    local roll, total = math.random(sum), 0
    for _, s in ipairs(splits) do
        total = total + s[1]
        if roll <= total then
            return s[2]
        end
    end
    return splits[#splits][2]
end

-- ${name} in a redirect URL or a return body: the request's variable (NIC's
-- lists of allowed names were checked before the record was written).
local function expand(text)
    return (gsub(text, "%${([%w_]+)}", function(name)
        return ngx.var[name] or ""
    end))
end

-- A proxy action's rewritePath (vs_routes.rewrite): the changed URI is what
-- proxy_pass sends (normalized, escaped, with the query string).
local function rewrite(route, rewrite_path, uri)
    local new
    if route.whole then
        new = gsub(rewrite_path, "%$%d", "")
    elseif route.options then
        local m = regex.match("rewrite", uri, "^" .. route.path, route.caseless and "ijo" or "jo")
        if m == nil then
            return
        end
        new = gsub(rewrite_path, "%$(%d)", function(d)
            return m[tonumber(d)] or ""
        end)
    else
        new = rewrite_path .. sub(uri, #route.path + 1)
    end
    ngx.req.set_uri(new, false)
end

local function answer(a)
    if a.kind == "redirect" then
        return ngx.redirect(expand(a.url), a.code)
    end
    ngx.status = a.code
    ngx.header["Content-Type"] = a.type
    for _, h in ipairs(a.headers) do
        ngx.header[h[1]] = h[2]
    end
    ngx.print(expand(a.body))
    return ngx.exit(ngx.HTTP_OK)
end

-- The slow path's access phase for a VirtualServer host: answers (redirects,
-- returns, 404), or returns the upstream to proxy to.
function _M.route(vs)
    if not seeded then
        -- Per worker (forked from one master): splits and lb-method random.
        math.randomseed(ngx.now() * 1000 + ngx.worker.pid())
        seeded = true
    end
    local var = ngx.var
    if vs.options then
        -- ferryman.lua's header filter applies them to every answer of the host.
        ngx.ctx.ferryman_options = vs.options
    end
    if vs.redirect then
        local proto = vs.redirect[2] and var.http_x_forwarded_proto or var.scheme
        if vs.redirect[3] then
            proto = var.http_x_forwarded_proto
        end
        if proto == "http" and vs.redirect[4] then
            local request_uri = var.request_uri
            if byte(request_uri, -1) == SLASH then
                request_uri = sub(request_uri, 1, -2)
            end
            -- Not through expand(): the request's URI is no template.
            return ngx.redirect("https://" .. var.host .. request_uri, vs.redirect[1])
        end
        if proto == "http" then
            return answer({
                kind = "redirect",
                code = vs.redirect[1],
                url = "https://${host}${request_uri}",
            })
        end
    end
    local spec = vs.policies
    if spec and spec.error then
        -- NIC's server-level "return 500" for a missing or invalid spec policy.
        return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
    end
    local uri = var.uri
    local route, redirect
    if vs.ordered then
        route = gateway_routes.first(vs, uri, holds)
        if route and route.cors then
            gateway_routes.preflight(route) -- answers preflights
        end
        if route and route.redirect then
            return gateway_routes.redirect(route, uri)
        end
    else
        route, redirect = find_route(vs, uri)
    end
    if route == nil then
        if spec then
            policies.enforce(spec, nil)
        end
        return ngx.exit(ngx.HTTP_NOT_FOUND)
    end
    if route.grpc and var.ferryman_variant ~= "grpc" then
        -- The slow path's location with grpc_pass (grpc-locations.conf.tmpl),
        -- before any policy counts the request.
        return ngx.exec("@ferryman_grpc")
    end
    if route.mirrors and var.ferryman_variant ~= "mirror" then
        gateway_routes.mirror(route, vs) -- goes on in a mirroring location, if any
    end
    if route.variant and var.ferryman_variant ~= route.variant then
        -- The same slow path in the location with proxy_buffering off and/or
        -- the route's buffer tier (nginx.conf.tmpl), before any policy
        -- counts the request.
        return ngx.exec(route.location)
    end
    if redirect then
        local args = var.args
        return ngx.redirect(route.path .. (args and args ~= "" and ("?" .. args) or ""), 301)
    end
    local response = nil
    local set = route.policies
    if set then
        if set.c or route.errors then
            -- The header filter adds CORS headers and error pages to policy answers too.
            response = { add = NONE, hide = NONE, errors = route.errors }
            ngx.ctx.ferryman_response = response
        end
        policies.enforce(set, response)
    end
    local splits = route.h2c and gateway_routes.splits(route) or route.default
    for _, m in ipairs(route.matches) do
        local all = true
        for _, c in ipairs(m[1]) do
            if not holds(c) then
                all = false
                break
            end
        end
        if all then
            splits = m[2]
            break
        end
    end
    local a = pick(splits)
    if a.kind ~= "pass" then
        return answer(a)
    end
    if route.gateway then
        gateway_routes.apply(route, a, uri, NONE)
    end
    if a.rewrite then
        rewrite(route, a.rewrite, uri)
    end
    if a.response or route.errors or response then
        -- For the header and body filters (one table per request: they mark it).
        response = response or {}
        response.add = a.response and a.response.add or NONE
        response.hide = a.response and a.response.hide or NONE
        response.passed = a.response and a.response.passed
        response.ignore_rate = a.response and a.response.ignore_rate
        response.redirect = a.response and a.response.redirect
        response.errors = route.errors
        ngx.ctx.ferryman_response = response
    end
    if a.drop_headers then
        -- NIC's proxy_pass_request_headers off: the client's headers stay
        -- behind, but those that frame the body and the request's Host.
        for name in pairs(ngx.req.get_headers(0, true)) do
            local lowered = lower(name)
            if not KEPT_HEADERS[lowered] then
                ngx.req.clear_header(name)
            end
        end
    end
    if a.set_headers then
        -- NIC's proxy_set_header: the value (with its variables) replaces the client's.
        for _, h in ipairs(a.set_headers) do
            upstream_fields.set_header(h[1], expand(h[2]))
        end
    end
    local upstream = vs.upstreams[a.upstream]
    upstream_fields.on_route(upstream)
    return upstream
end

-- The status codes NGINX's add_header applies to without "always".
local ADD_HEADER_CODES = {
    [200] = true, [201] = true, [204] = true, [206] = true, [301] = true,
    [302] = true, [303] = true, [304] = true, [307] = true, [308] = true,
}

-- NIC's errorPages (proxy_intercept_errors, error_page): a response with one of
-- the codes is replaced, headers here, body in body_filter.
local function error_page(response, page)
    ngx.header["Content-Length"] = nil
    if page.kind == "redirect" then
        ngx.status = page.code
        ngx.header["Location"] = expand(page.url)
        response.body = ""
        return
    end
    if page.code ~= 0 then
        ngx.status = page.code
    end
    ngx.header["Content-Type"] = page.type
    for _, h in ipairs(page.headers) do
        ngx.header[h[1]] = expand(h[2])
    end
    response.body = expand(page.body)
end

-- NIC's responseHeaders: hide (proxy_hide_header: the upstream's header is
-- not passed) and add (add_header [always]), in the header filter.
function _M.header_filter(response)
    local page = response.errors and response.errors[ngx.status]
    if page then
        return error_page(response, page)
    end
    if ngx.var.upstream_status then
        for _, name in ipairs(response.hide) do
            ngx.header[name] = nil
        end
        upstream_fields.header_filter(response.passed, response.ignore_rate)
        if response.redirect then
            proxy_redirect.header_filter(response.redirect)
        end
    end
    local codes_ok = ADD_HEADER_CODES[ngx.status]
    for _, h in ipairs(response.add) do
        if h[3] or codes_ok then
            ngx.header[h[1]] = expand(h[2])
        end
    end
    -- An HTTPRoute's ResponseHeaderModifier, whatever the status.
    if response.gateway then
        gateway_routes.response_headers(response.gateway)
    end
    -- A CORS Policy's headers (NIC's add_header ... always).
    for _, h in ipairs(response.cors or NONE) do
        ngx.header[h[1]] = h[2]
    end
    -- A route with headers of its own does not inherit the ConfigMap's
    -- add-header (declared only when the ConfigMap has one; NGINX's add_header
    -- runs after this filter and skips the values this empties).
    if (#response.add > 0 or response.cors) and ngx.var.ferryman_own_headers then
        ngx.var.ferryman_own_headers = "1"
    end
end

-- The body of a replaced response: the error page's, once, instead of the
-- original's chunks.
function _M.body_filter(response)
    if response.body == nil then
        return
    end
    if response.sent then
        ngx.arg[1] = ""
        return
    end
    ngx.arg[1] = response.body
    response.sent = true
end

-- The value an upstream's lb-method hashes for this request: ip_hash takes
-- the client's IPv4 network (three octets) or whole IPv6 address, as NGINX;
-- hash its key with NGINX's variables ($name, ${name}) substituted.
function _M.hash_value(upstream)
    local var = ngx.var
    if upstream.hash == "ip" then
        local addr = var.remote_addr or ""
        return string.match(addr, "^(%d+%.%d+%.%d+)%.%d+$") or addr
    end
    return (gsub(upstream.hash_key or "", "%${?([%w_]+)}?", function(name)
        return var[name] or ""
    end))
end

return _M
