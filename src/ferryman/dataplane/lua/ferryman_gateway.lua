-- Gateway API listeners: the W record serving a request's socket and name
-- (grammar and the choice of listener: ferryman.kinds.gateway.records.servers).
-- A record is "<certificate id or -> <listener> <V record>"; its G items are
-- routed by ferryman_vs like a VirtualServer's.

local virtual_servers = require("ferryman_vs")

local find, sub, byte = string.find, string.sub, string.byte

local _M = {}

-- "W:<socket>/<name>" -> entry, or false when none. Names a client may send are
-- unbounded: lua-resty-lrucache (installed with lua-resty-core) drops the least
-- recently used when full, so names nobody sends again do not evict the rest.
local cache = require("resty.lrucache").new(10000)
local MAX_NAME = 253

function _M.reset()
    cache:flush_all()
end

local function entry_of(store, key)
    local entry = cache:get(key)
    if entry == nil then
        local raw = store:get(key)
        entry = false
        if raw then
            local tls, listener, rest = string.match(raw, "^(%S+) (%S+) (.*)$")
            if tls then
                entry = {
                    key = key,
                    tls = tls,
                    listener = listener,
                    vs = virtual_servers.decode(rest),
                }
            end
        end
        cache:set(key, entry)
    end
    return entry or nil
end

-- The exact name, then each wildcard covering it from the longest suffix
-- ("*.b.c" before "*.c" for "a.b.c"), then any name ("_").
local function at_socket(store, prefix, name)
    if name ~= "" then
        local entry = entry_of(store, prefix .. name)
        if entry then
            return entry
        end
        local rest = name
        while true do
            local dot = find(rest, ".", 1, true)
            if dot == nil then
                break
            end
            rest = sub(rest, dot + 1)
            entry = entry_of(store, prefix .. "*." .. rest)
            if entry then
                return entry
            end
        end
    end
    return entry_of(store, prefix .. "_")
end

-- A DNS name as a validated hostname could be (lowercase), or "": only such
-- names are looked up, so clients cannot fill the cache with others.
local function usable(name)
    if name == nil or #name > MAX_NAME or find(name, "^[a-z0-9.-]+$") == nil then
        return ""
    end
    return name
end

-- The entry for a request on ``address``:``port`` (the Gateway's own
-- address, else every address, "*") for ``name`` (lowercase), nil for none.
function _M.lookup(store, address, port, name)
    name = usable(name)
    return at_socket(store, "W:" .. address .. ":" .. port .. "/", name)
        or at_socket(store, "W:*:" .. port .. "/", name)
end

-- The dotted address of ngx.ssl.raw_server_addr()'s IPv4 bytes ("" otherwise).
function _M.ipv4(raw, kind)
    if kind ~= "inet" or raw == nil or #raw ~= 4 then
        return ""
    end
    local a, b, c, d = byte(raw, 1, 4)
    return a .. "." .. b .. "." .. c .. "." .. d
end

return _M
