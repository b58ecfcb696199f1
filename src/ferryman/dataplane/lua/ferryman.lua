-- ferryman's Lua side: endpoint sets in a shared dict, chosen per request.
--
-- ferryman POSTs endpoint changes to /endpoints on a unix socket:
--   line 1:        <version> [full]
--   other lines:   <backend key>\t<addr>#<port> <addr>#<port> ...   (empty list: remove)
-- "full" replaces every set. The sets live in the shared dict
-- ferryman_endpoints, which survives reloads; each worker keeps a decoded copy
-- and drops it when the dict's version moves, so every worker uses a pushed
-- version from its next request on. The push answers with that version.

local balancer = require("ngx.balancer")

local endpoints = ngx.shared.ferryman_endpoints
local counters = ngx.shared.ferryman_balancer

local _M = {}

local cache = {}
local cache_version = nil

local function peers_for(key)
    local version = endpoints:get("version")
    if version ~= cache_version then
        cache = {}
        cache_version = version
    end
    local peers = cache[key]
    if peers == nil then
        peers = {}
        local raw = endpoints:get("ep:" .. key)
        if raw then
            for addr, port in string.gmatch(raw, "([^%s#]+)#(%d+)") do
                peers[#peers + 1] = { addr, tonumber(port) }
            end
        end
        cache[key] = peers
    end
    return peers
end

function _M.access()
    local key = ngx.var.ferryman_backend
    if key == nil or key == "" then
        return
    end
    if #peers_for(key) == 0 then
        return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
    end
end

function _M.balance()
    local key = ngx.var.ferryman_backend
    local peers = peers_for(key)
    local n = #peers
    if n == 0 then
        return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
    end
    local ctx = ngx.ctx
    local index = ctx.ferryman_index
    if index == nil then
        -- Round-robin shared by all workers, so spreading does not depend on
        -- which worker took the connection.
        index = counters:incr(key, 1, 0) or 0
        if n > 1 then
            -- A failed connect moves on to the next peer, each tried once.
            balancer.set_more_tries(n - 1)
        end
    else
        index = index + 1
    end
    ctx.ferryman_index = index
    local peer = peers[(index % n) + 1]
    local ok, err = balancer.set_current_peer(peer[1], peer[2])
    if not ok then
        ngx.log(ngx.ERR, "ferryman: cannot use peer ", peer[1], ":", peer[2], ": ", err)
        return ngx.exit(ngx.ERROR)
    end
end

function _M.push()
    ngx.req.read_body()
    local body = ngx.req.get_body_data() or ""
    local header, rest = string.match(body, "^([^\n]*)\n?(.*)$")
    local version, mode = string.match(header or "", "^(%d+)%s*(%a*)$")
    if version == nil then
        ngx.status = ngx.HTTP_BAD_REQUEST
        ngx.say("bad header")
        return
    end
    if mode == "full" then
        endpoints:flush_all()
    end
    for line in string.gmatch(rest, "[^\n]+") do
        local key, list = string.match(line, "^([^\t]+)\t?(.*)$")
        if key then
            if list == "" then
                endpoints:delete("ep:" .. key)
            else
                local ok, err = endpoints:safe_set("ep:" .. key, list)
                if not ok then
                    ngx.status = ngx.HTTP_INSUFFICIENT_STORAGE
                    ngx.say("cannot store ", key, ": ", err)
                    return
                end
            end
        end
    end
    endpoints:set("version", tonumber(version))
    ngx.say(version)
end

function _M.version()
    return endpoints:get("version")
end

return _M
