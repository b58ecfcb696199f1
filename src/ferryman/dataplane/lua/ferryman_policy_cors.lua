-- The cors Policy: NIC's CORS headers on the route's responses and its
-- answer to preflights (any OPTIONS request: 204). P item and rules:
-- kinds/policy/records/cors.py.

local decode_base64 = ngx.decode_base64
local lower, sub = string.lower, string.sub
local re_find = ngx.re.find

local _M = {}

function _M.decode(f)
    local config = { headers = {} }
    local origin = f[1]
    if origin == "*" then
        config.fixed = "*"
    elseif sub(origin, 1, 1) == "=" then
        config.fixed = decode_base64(sub(origin, 2))
    else
        -- NGINX's map: exact origins caselessly, wildcards as regular expressions.
        config.exact, config.regexes = {}, {}
        for item in string.gmatch(origin, "[^,]+") do
            local value = decode_base64(sub(item, 3))
            if sub(item, 1, 1) == "e" then
                config.exact[lower(value)] = value
            else
                config.regexes[#config.regexes + 1] = value
            end
        end
    end
    config.vary = f[2] == "1"
    for pair in string.gmatch(f[3] or "", "[^^]+") do
        local name, value = string.match(pair, "^([^~]*)~(.*)$")
        config.headers[#config.headers + 1] = { decode_base64(name), decode_base64(value) }
    end
    return config
end

local function allowed_origin(config)
    if config.fixed then
        return config.fixed
    end
    local origin = ngx.var.http_origin
    if origin == nil or origin == "" then
        return nil
    end
    local exact = config.exact[lower(origin)]
    if exact then
        return exact
    end
    for _, regex in ipairs(config.regexes) do
        if re_find(origin, regex, "jo") then
            return origin
        end
    end
    return nil
end

-- This request's headers; a preflight is answered here.
function _M.apply(config, response)
    local headers = {}
    if config.vary then
        headers[#headers + 1] = { "Vary", "Origin" }
    end
    local origin = allowed_origin(config)
    if origin then
        headers[#headers + 1] = { "Access-Control-Allow-Origin", origin }
    end
    for _, h in ipairs(config.headers) do
        headers[#headers + 1] = h
    end
    if ngx.req.get_method() == "OPTIONS" then
        for _, h in ipairs(headers) do
            ngx.header[h[1]] = h[2]
        end
        -- NIC's add_header lines also give "Content-Type: text/plain" and
        -- "Content-Length: 0"; NGINX drops both from a 204 answered here.
        return ngx.exit(ngx.HTTP_NO_CONTENT)
    end
    if response then
        response.cors = headers
    end
end

return _M
