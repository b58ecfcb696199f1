-- Requests in flight per peer, for ferryman's drains (dataplane/in_flight.py),
-- and the peers that left an endpoint set, which are still asked about.
--
-- GET /in-flight answers "measured", then "<name> <count>" for each peer with
-- any, named as $upstream_addr names it. The peers asked about: those of every
-- endpoint set, and those that left one (see GONE_TTL). Counts are the
-- module's (the fast path) plus the slow path's. Without the module the Lua
-- fast path counts nothing (that would take a log phase per request, a few
-- percent of throughput): the answer is then "unmeasured" alone, so no one
-- reads zeros as "drained".

local ffi = require("ffi")

local store = ngx.shared.ferryman
local counters = ngx.shared.ferryman_balancer
-- Peers that left an endpoint set, apart from the counters: a full counters
-- dict evicts its least recently used keys, and a peer evicted from here
-- would read as drained.
local gone_peers = ngx.shared.ferryman_gone
local byte = string.byte

-- Peers that left an endpoint set are asked about for this long (seconds)
-- after, and as long as requests to them are in flight when asked: a request
-- routed before the push goes on with the peers it was routed with, and a
-- retry of it can still start at one that left.
local GONE_TTL = 600

local _M = {}

-- The peers ("<addr>#<port>") an endpoint set's value lists.
function _M.peer_ids(value, into)
    into = into or {}
    for id in string.gmatch(value or "", "%S+") do
        into[id] = true
    end
    return into
end

-- Every peer of every endpoint set in the dict.
function _M.all_peer_ids()
    local ids = {}
    for _, key in ipairs(store:get_keys(0)) do
        if byte(key, 1) == byte("E") and byte(key, 2) == byte(":") then
            _M.peer_ids(store:get(key), ids)
        end
    end
    return ids
end

-- The peers of ``ids`` not in ``still`` left their set: kept for GET /in-flight.
function _M.gone(ids, still)
    for id in pairs(ids) do
        if not still[id] then
            local ok, err = gone_peers:safe_set(id, true, GONE_TTL)
            if not ok then
                ngx.log(ngx.ERR, "ferryman: cannot keep peer ", id, " for /in-flight: ", err)
            end
        end
    end
end

local name_buf = ffi.new("char[256]")
local name_len = ffi.new("size_t[1]")
local count_buf = ffi.new("uint64_t[1]")

-- The answer of GET /in-flight. count_of: the module's
-- ngx_http_ferryman_in_flight, nil when there is no module (or no zone).
function _M.answer(count_of)
    if count_of == nil then
        ngx.say("unmeasured")
        return
    end
    local ids = _M.all_peer_ids()
    local left = {}
    for _, id in ipairs(gone_peers:get_keys(0)) do
        left[id] = true
        ids[id] = true
    end
    -- One module count per name (ids may spell one address differently),
    -- the slow path's per id.
    local counts = {}
    for id in pairs(ids) do
        if count_of(id, #id, name_buf, name_len, count_buf) == 0 then
            local name = ffi.string(name_buf, name_len[0])
            local slow = counters:get("a:" .. id) or 0
            counts[name] = (counts[name] or tonumber(count_buf[0])) + slow
            if left[id] and tonumber(count_buf[0]) + slow > 0 then
                gone_peers:safe_set(id, true, GONE_TTL)
            end
        end
    end
    local lines = { "measured" }
    for name, n in pairs(counts) do
        if n > 0 then
            lines[#lines + 1] = name .. " " .. n
        end
    end
    ngx.say(table.concat(lines, "\n"))
end

return _M
