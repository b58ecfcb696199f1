-- ingress-nginx's limit-connections: NGINX's limit_conn keyed by the client's
-- address, one zone per Ingress (kinds/ingress/records/limit_conn.py has the
-- P item). A request counts from the moment its route is chosen until its
-- log phase (ferryman.log calls leave(), in every location a counted request
-- can end in); one more than allowed at once is answered the item's status
-- (ingress-nginx's limit-conn-status-code, 503) and logged at "error", as
-- limit_conn does. A client of the allow list
-- (limit-allowlist) is not counted, as NGINX does not count an empty key.
-- In HTTP/2 each stream is a request, and so counts, as in limit_conn.
--
-- The counters live in the ferryman_limits dict, beside the rate limits',
-- under "\2<zone>\0<address>". Each count refreshes its entry's lifetime, so
-- a client's idle zero leaves the dict after TTL seconds and an entry in use
-- is kept while its client keeps sending; a worker that died with requests
-- counted leaves a count that expires the same way.

local access = require("ferryman_policy_access")

local dict = ngx.shared.ferryman_limits
local tonumber = tonumber
local find, gmatch = string.find, string.gmatch
local encode_base64, decode_base64 = ngx.encode_base64, ngx.decode_base64

local TTL = 3600

local _M = {}

function _M.decode(f)
    return {
        zone = decode_base64(f[1]) or "",
        max = tonumber(f[2]) or 0,
        status = tonumber(f[3]) or 503,
        exempt = access.networks_of(f[4]),
    }
end

-- The keys a request counts in are kept in $ferryman_conns (base64, comma
-- separated) rather than ngx.ctx: a variable outlives an internal redirect
-- (a gRPC error's error_page), ngx.ctx does not, and a count never given
-- back would hold the client's place while it keeps sending.
function _M.check(config)
    local var = ngx.var
    local addr = var.binary_remote_addr
    if addr == nil or addr == "" or (#config.exempt > 0 and access.client_in(config.exempt)) then
        return nil
    end
    local key = "\2" .. config.zone .. "\0" .. addr
    local held = var.ferryman_conns or ""
    local encoded = encode_base64(key)
    if find(held, encoded .. ",", 1, true) then
        return nil -- counted once per request
    end
    local n, err = dict:incr(key, 1, 0)
    if n == nil then
        -- As limit_conn when its zone is full: refused.
        ngx.log(ngx.ERR, "could not count connections in zone \"", config.zone, "\": ", err)
        return config.status
    end
    dict:expire(key, TTL)
    if n > config.max then
        dict:incr(key, -1)
        ngx.log(ngx.ERR, "limiting connections by zone \"", config.zone, "\"")
        return config.status
    end
    var.ferryman_conns = held .. encoded .. ","
    return nil
end

-- The log phase: the request's counts are given back.
function _M.leave()
    local var = ngx.var
    local held = var.ferryman_conns
    if held == nil or held == "" then
        return
    end
    var.ferryman_conns = ""
    for encoded in gmatch(held, "[^,]+") do
        dict:incr(decode_base64(encoded), -1)
    end
end

return _M
