-- An HTTPRoute's CORS filter (Gateway API; the "o" filter of a G item,
-- ferryman.kinds.gateway.records.routes). Not NIC's cors Policy
-- (ferryman_policy_cors.lua), whose rules differ: here a preflight is an
-- OPTIONS request with Origin and Access-Control-Request-Method, answered 204
-- without reaching the backend (with the CORS headers only for an allowed
-- origin); other requests from an allowed origin get the headers on the
-- backend's answer; from any other origin they pass untouched (the browser
-- then refuses the answer).
--
-- What is echoed from the request is held to the shape it must have first
-- (an origin, a method, a list of header names), so no client string reaches
-- a response header unchecked.

local cut = require("ferryman_policy").cut

local decode_base64 = ngx.decode_base64
local re_find = ngx.re.find

local ORIGIN = [[^[a-z][a-z0-9+.-]*://[a-z0-9.-]+(?::[0-9]{1,5})?$]]
local TOKEN = [[^[A-Za-z0-9!#$%&'*+.^_`|~-]+$]]
local TOKENS = [[^[A-Za-z0-9!#$%&'*+.^_`|~-]+(?:[ \t]*,[ \t]*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$]]

local _M = {}

function _M.decode(payload)
    local f = cut(payload, "~")
    local origins = decode_base64(f[1])
    return {
        origins = origins ~= "*" and origins or nil, -- nil: any origin
        methods = decode_base64(f[2]),
        headers = decode_base64(f[3]),
        expose = decode_base64(f[4]),
        max_age = f[5],
        credentials = f[6] == "1",
    }
end

-- The request's Origin when the rule allows it, else nil.
local function allowed(config)
    local origin = ngx.var.http_origin
    if origin == nil or not re_find(origin, ORIGIN, "ijo") then
        return nil
    end
    if config.origins and not re_find(origin, config.origins, "ijo") then
        return nil
    end
    return origin
end

-- "*" stands for anything only without credentials; with them the
-- specification asks for the request's own value (if it has the right shape).
local function wildcard(config, configured, asked, shape)
    if configured ~= "*" then
        return configured ~= "" and configured or nil
    end
    if not config.credentials then
        return "*"
    end
    if asked and re_find(asked, shape, "jo") then
        return asked
    end
    return nil
end

-- The headers every answer to an allowed origin carries.
local function allowing(config, origin)
    local out = { { "Access-Control-Allow-Origin",
                    (config.origins == nil and not config.credentials) and "*" or origin } }
    if config.credentials then
        out[#out + 1] = { "Access-Control-Allow-Credentials", "true" }
    end
    if config.expose ~= "" then
        out[#out + 1] = { "Access-Control-Expose-Headers", config.expose }
    end
    return out
end

-- A preflight is answered here (204); returns for any other request.
function _M.preflight(config)
    local var = ngx.var
    local method = var.http_access_control_request_method
    if method == nil or ngx.req.get_method() ~= "OPTIONS" then
        return
    end
    local origin = allowed(config)
    if origin == nil then
        -- Answered too, without a header that would allow anything: the
        -- backend never sees a preflight the filter governs.
        return ngx.exit(ngx.HTTP_NO_CONTENT)
    end
    local h = ngx.header
    for _, pair in ipairs(allowing(config, origin)) do
        h[pair[1]] = pair[2]
    end
    h["Access-Control-Allow-Methods"] = wildcard(config, config.methods, method, TOKEN)
    h["Access-Control-Allow-Headers"] =
        wildcard(config, config.headers, var.http_access_control_request_headers, TOKENS)
    h["Access-Control-Max-Age"] = config.max_age
    h["Vary"] = "Origin"
    return ngx.exit(ngx.HTTP_NO_CONTENT)
end

-- The response header changes (ferryman_gateway_routes' "s"/"a" ops) for a
-- request from an allowed origin; nil for any other.
function _M.response(config)
    local origin = allowed(config)
    if origin == nil then
        return nil
    end
    local ops = { { "a", "Vary", "Origin" } }
    for _, pair in ipairs(allowing(config, origin)) do
        ops[#ops + 1] = { "s", pair[1], pair[2] }
    end
    return ops
end

return _M
