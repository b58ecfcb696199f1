-- Peer choice and passive health for ferryman.lua's balancers: round-robin
-- over a counter all workers share, least_conn, a VirtualServer upstream's
-- random and hash methods, max_fails/fail_timeout, and the active-request
-- counts (the dict ferryman_balancer) that least_conn and GET /in-flight read.
-- Its own module because it is what the balancers share: the fast path's
-- (ferryman.fast, which holds choose, use and tried_peers as upvalues, so a
-- request pays no more calls than with them in ferryman.lua) and the slow
-- path's (balance and log here, which ferryman.lua exports as they are).
-- A peer is { addr, port, id, failure counter key, active counter key, name }
-- (ferryman.lua's peers_for).

local balancer = require("ngx.balancer")
local virtual_servers = require("ferryman_vs")
local upstream_fields = require("ferryman_vs_upstream")
local sticky = require("ferryman_sticky")
local upstream_verify = require("ferryman_upstream_verify")

local counters = ngx.shared.ferryman_balancer

local _M = {}

-- Passive health, as NGINX's max_fails/fail_timeout: a peer that failed
-- max_fails times is skipped for fail_timeout seconds, unless every peer is.
local function is_down(peer, host)
    if host.max_fails == 0 then
        return false
    end
    local fails = counters:get(peer[4])
    return fails ~= nil and fails >= host.max_fails
end

-- Round-robin from a counter all workers share (so requests spread evenly
-- whichever worker takes them), or the least active requests for least_conn.
local function choose(peers, host, tried)
    local n = #peers
    local start = (counters:incr(peers.rr, 1, 0) or 0) % n
    local best, best_load, fallback
    for offset = 0, n - 1 do
        local peer = peers[((start + offset) % n) + 1]
        if not (tried and tried[peer[3]]) then
            fallback = fallback or peer
            if not is_down(peer, host) then
                if not host.least_conn then
                    return peer
                end
                local load = counters:get(peer[5]) or 0
                if best == nil or load < best_load then
                    best, best_load = peer, load
                end
            end
        end
    end
    return best or fallback
end

-- A VirtualServer upstream's lb-method random (host.random = 1: one peer at
-- random) or random two (host.random = 2: the less active of two at random,
-- NGINX's "random two least_conn"), among the peers not tried and not down
-- (all not tried when every one is down).
local function choose_random(peers, host, tried)
    local up, left = {}, {}
    for _, peer in ipairs(peers) do
        if not (tried and tried[peer[3]]) then
            left[#left + 1] = peer
            if not is_down(peer, host) then
                up[#up + 1] = peer
            end
        end
    end
    local pool = #up > 0 and up or left
    local n = #pool
    if n == 0 then
        return nil
    end
    local first = pool[math.random(n)]
    if host.random < 2 or n < 2 then
        return first
    end
    local second = pool[math.random(n - 1)]
    if second == first then
        second = pool[n]
    end
    local a, b = counters:get(first[5]) or 0, counters:get(second[5]) or 0
    return b < a and second or first
end

-- Points per peer on the consistent-hash ring (NGINX's ketama uses 160 per
-- weight unit).
local RING_POINTS = 160

-- The ring of a peer set, built once per decoded set: sorted points, each
-- with its peer.
local function ring_of(peers)
    local ring = peers.ring
    if ring == nil then
        ring = {}
        for _, peer in ipairs(peers) do
            for i = 1, RING_POINTS do
                ring[#ring + 1] = { ngx.crc32_long(peer[3] .. "-" .. i), peer }
            end
        end
        table.sort(ring, function(a, b)
            return a[1] < b[1]
        end)
        peers.ring = ring
    end
    return ring
end

-- A VirtualServer upstream's lb-method hash [consistent] or ip_hash: the same
-- value picks the same peer while it is up; when it is down or tried, the
-- next one (on the ring, or in order), so a key moves only with its peer.
local function choose_hash(peers, host, tried)
    local h = ngx.crc32_long(virtual_servers.hash_value(host))
    local ring, count, at = nil, #peers, 0
    if host.hash == "hc" then
        ring = ring_of(peers)
        count = #ring
        -- The first point at or after h, round the ring.
        local lo, hi = 1, count
        while lo < hi do
            local mid = math.floor((lo + hi) / 2)
            if ring[mid][1] < h then
                lo = mid + 1
            else
                hi = mid
            end
        end
        at = ring[lo][1] < h and 0 or lo - 1
    else
        at = h % count
    end
    local fallback
    for i = 0, count - 1 do
        local slot = ((at + i) % count) + 1
        local peer = ring and ring[slot][2] or peers[slot]
        if not (tried and tried[peer[3]]) then
            if not is_down(peer, host) then
                return peer
            end
            fallback = fallback or peer
        end
    end
    return fallback
end

local function use(peer)
    local ok, err = balancer.set_current_peer(peer[1], peer[2])
    if not ok then
        ngx.log(ngx.ERR, "ferryman: cannot use peer ", peer[1], ":", peer[2], ": ", err)
        return ngx.exit(ngx.ERROR)
    end
end

-- NGINX's $upstream_addr lists the peers this request tried ("a:p, b:p"), and
-- the attempt being chosen now as an empty entry (" : ").
local function tried_peers(peers)
    local names, last = {}, nil
    for name in string.gmatch(ngx.var.upstream_addr or "", "[^,%s]+") do
        if name ~= ":" then
            names[name] = true
            last = name
        end
    end
    local tried, previous = {}, nil
    for _, peer in ipairs(peers) do
        if names[peer[6]] then
            tried[peer[3]] = true
        end
        if peer[6] == last then
            previous = peer
        end
    end
    return tried, previous
end

-- A request's first attempt: more tries for the other peers, at most a
-- VirtualServer upstream's next-upstream-tries (0: no limit), and its timeouts.
local function first_attempt(host, n)
    local more = n - 1
    local tries = host.tries
    if tries and tries > 0 and tries - 1 < more then
        more = tries - 1
    end
    if more > 0 then
        balancer.set_more_tries(more)
    end
    -- An HTTPRoute rule's timeouts (ferryman_gateway_routes) before the upstream's.
    local timeouts = ngx.ctx.ferryman_timeouts or host.timeouts
    if timeouts then
        balancer.set_timeouts(timeouts[1], timeouts[2], timeouts[3])
    end
end

-- balancer_by_lua of the slow path's upstream (least_conn hosts proxy here).
function _M.balance()
    local ctx = ngx.ctx
    local peers = ctx.ferryman_peers
    local host = ctx.ferryman_host
    local n = peers and #peers or 0
    if n == 0 then
        return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
    end
    local tried = ctx.ferryman_tried
    if tried == nil then
        tried = {}
        ctx.ferryman_tried = tried
        first_attempt(host, n)
        upstream_fields.too_late(host, ctx)
        -- egressMTLS verifyServer, externalAuth sslVerify: the upstream's
        -- TLS context for every attempt of this request.
        if not upstream_verify.apply() then
            return ngx.exit(upstream_fields.NO_LIVE_UPSTREAMS)
        end
    else
        local previous = ctx.ferryman_peer
        if ctx.ferryman_counted then
            counters:incr(previous[5], -1, 0)
            ctx.ferryman_counted = false
        end
        if host.max_fails > 0 then
            counters:incr(previous[4], 1, 0, host.fail_timeout)
        end
        if upstream_fields.too_late(host, ctx) then
            return ngx.exit(upstream_fields.NO_LIVE_UPSTREAMS)
        end
    end
    -- A VirtualServer upstream's max-conns: the full peers count as tried.
    local avoid = upstream_fields.excluded(host, peers, tried) or tried
    local peer
    if host.sticky and ctx.ferryman_peer == nil then
        -- nginx.org/sticky-cookie-services: the peer the request's cookie names.
        peer = sticky.peer(peers, host.sticky, avoid, function(p)
            return is_down(p, host)
        end)
    end
    if peer == nil then
        if host.random then
            peer = choose_random(peers, host, avoid)
        elseif host.hash then
            peer = choose_hash(peers, host, avoid)
        else
            peer = choose(peers, host, avoid)
        end
    end
    if peer == nil then
        return ngx.exit(upstream_fields.NO_LIVE_UPSTREAMS)
    end
    tried[peer[3]] = true
    ctx.ferryman_peer = peer
    -- Every attempt is counted until the next one or the log phase: least_conn
    -- balances by it and GET /in-flight reports it (with the module, the
    -- slow path proxies only what a push raced past the module's routing).
    counters:incr(peer[5], 1, 0)
    ctx.ferryman_counted = true
    if ctx.ferryman_error_pages then
        -- An error page's location ends the count (ngx.ctx does not follow).
        ngx.var.ferryman_counted = peer[5]
    end
    return use(peer)
end

-- The end of a request's counted attempt (externalAuth's subrequests end
-- theirs with it too: ferryman.lua hands it to ferryman_policy_external).
local function release(ctx)
    if ctx.ferryman_counted then
        counters:incr(ctx.ferryman_peer[5], -1, 0)
        ctx.ferryman_counted = false
    end
end

-- log_by_lua of the slow path.
function _M.log()
    release(ngx.ctx)
end

-- For ferryman.lua's fast path and wiring.
_M.choose = choose
_M.use = use
_M.tried_peers = tried_peers
_M.release = release

return _M
