-- The rateLimit Policy: NGINX's limit_req (a leaky bucket per key) over the
-- shared dict ferryman_limits, which every worker shares as NGINX's zone is.
-- P item and units: configs/policy_rate.py. Arithmetic as
-- ngx_http_limit_req_module's (1.22): per key, "excess" in thousandths of a
-- request and the time of the last counted request in ms; a request adds
-- 1000 and the rate leaks it away; past burst it is refused; beyond "delay"
-- it waits (excess - delay) / rate.

local vars = require("ferryman_policy_vars")

local dict = ngx.shared.ferryman_limits
local decode_base64 = ngx.decode_base64
local floor, lower, match = math.floor, string.lower, string.match
local tonumber = tonumber
local sub, re_find = string.sub, ngx.re.find

local _M = {}

-- NIC's logLevel: the level of rejections; delays are logged one lower, as NGINX does.
local LEVELS = {
    info = { ngx.INFO, ngx.DEBUG },
    notice = { ngx.NOTICE, ngx.INFO },
    warn = { ngx.WARN, ngx.NOTICE },
    error = { ngx.ERR, ngx.WARN },
}
-- NGINX's nodelay: a delay threshold no excess reaches.
local NO_DELAY = 2 ^ 52

local function limit_of(text)
    local f = {}
    for part in string.gmatch(text .. ".", "([^.]*)%.") do
        f[#f + 1] = part
    end
    local zone = decode_base64(f[1])
    local delay = tonumber(f[5])
    local limit = {
        zone = zone,
        -- NIC's zone name, for the log lines NGINX would write.
        name = "pol_rl_" .. string.gsub(zone, "[/-]", "_") .. "_vs",
        rate = tonumber(f[2]),
        key = decode_base64(f[3]),
        burst = tonumber(f[4]) * 1000,
        delay = delay < 0 and NO_DELAY or delay * 1000,
        variable = f[6] ~= "" and decode_base64(f[6]) or nil,
        default = f[8] == "1",
    }
    if limit.variable then
        -- NIC's map value: "~regex" (case-sensitive), "~*regex", else a string
        -- NGINX's map matches ignoring case.
        local value = decode_base64(f[7])
        if sub(value, 1, 2) == "~*" then
            limit.match, limit.regex = sub(value, 3), "joi"
        elseif sub(value, 1, 1) == "~" then
            limit.match, limit.regex = sub(value, 2), "jo"
        else
            limit.match = lower(value)
        end
    end
    return limit
end

function _M.decode(f)
    local config = {
        dry_run = f[1] == "1",
        levels = LEVELS[f[2]] or LEVELS.error,
        reject = tonumber(f[3]) or 503,
        limits = {},
    }
    for i = 4, #f do
        config.limits[#config.limits + 1] = limit_of(f[i])
    end
    return config
end

-- A bucket's entry is written by one worker at a time: a lock entry, taken
-- with add() (atomic across workers), held for a few microseconds.
local function lock(id)
    local key = "\1" .. id
    for _ = 1, 50 do
        if dict:add(key, true, 0.1) then
            return key
        end
        ngx.sleep(0.001)
    end
    return key -- held too long (a worker died holding it): go on
end

local function state(id)
    local value = dict:get(id)
    if value == nil then
        return nil
    end
    local excess, last = match(value, "^(%d+) (%d+)$")
    return tonumber(excess), tonumber(last)
end

-- Kept until the bucket has leaked empty (then a new entry is the same), as
-- NGINX expires its states.
local function store(id, limit, excess, last)
    local ttl = (excess + 1000) / limit.rate + 1
    dict:set(id, excess .. " " .. last, ttl)
end

-- NGINX's excess for one more request now (never negative).
local function excess_now(limit, excess, last, now)
    local ms = now - last
    if ms < -60000 then
        ms = 1
    elseif ms < 0 then
        ms = 0
    end
    local e = excess - floor(limit.rate * ms / 1000) + 1000
    return e < 0 and 0 or e, ms
end

-- ngx_http_limit_req_lookup: the excess, whether over burst, and for the last
-- limit (account) the new state.
local function lookup(limit, id, now, account)
    local held = lock(id)
    local excess, last = state(id)
    local e, busy = 0, false
    if excess == nil then
        if account then
            store(id, limit, 0, now)
        end
    else
        local ms
        e, ms = excess_now(limit, excess, last, now)
        if e > limit.burst then
            busy = true
        elseif account then
            store(id, limit, e, ms ~= 0 and now or last)
        end
    end
    dict:delete(held)
    return e, busy
end

-- ngx_http_limit_req_account, for the limits before the last: counted once
-- all passed.
local function account(limit, id, now)
    local held = lock(id)
    local excess, last = state(id)
    local e = 0
    if excess ~= nil then
        local ms
        e, ms = excess_now(limit, excess, last, now)
        last = ms ~= 0 and now or last
    else
        last = now
    end
    store(id, limit, e, last)
    dict:delete(held)
    return e
end

-- Tiered limits: of those conditioned on one variable, the matching ones,
-- else the default.
local function applies(config, set)
    local on = {}
    local matched = {}
    for _, limit in ipairs(config.limits) do
        if limit.variable then
            local value = vars.value(limit.variable, set) or ""
            local hit
            if limit.regex then
                hit = re_find(value, limit.match, limit.regex) ~= nil
            else
                hit = lower(value) == limit.match
            end
            if hit then
                on[limit] = true
                matched[limit.variable] = true
            end
        else
            on[limit] = true
        end
    end
    for _, limit in ipairs(config.limits) do
        if limit.variable and limit.default and not matched[limit.variable] then
            on[limit] = true
        end
    end
    return on
end

local function milli(e)
    return string.format("%d.%03d", floor(e / 1000), e % 1000)
end

function _M.check(config, set)
    local on = applies(config, set)
    local active = {}
    for _, limit in ipairs(config.limits) do
        if on[limit] then
            local key = vars.expand(limit.key, set)
            if limit.variable then
                key = "Val" .. key -- NIC's tiered key: never empty
            end
            -- An empty key is not limited, as NGINX's.
            if key ~= "" then
                active[#active + 1] = { limit, limit.zone .. "\0" .. key }
            end
        end
    end
    local n = #active
    if n == 0 then
        return nil
    end
    local now = floor(ngx.now() * 1000)
    local dry = config.dry_run and ", dry run" or ""
    local excess
    for i, a in ipairs(active) do
        local busy
        excess, busy = lookup(a[1], a[2], now, i == n)
        if busy then
            ngx.log(config.levels[1], "limiting requests", dry, ", excess: ", milli(excess),
                " by zone \"", a[1].name, "\"")
            if config.dry_run then
                return nil
            end
            return config.reject
        end
    end
    -- All passed: count the others, and wait for the longest delay.
    local wait, worst, by = 0, 0, nil
    for i, a in ipairs(active) do
        local limit = a[1]
        local e = i == n and excess or account(limit, a[2], now)
        if e > limit.delay then
            local ms = floor((e - limit.delay) * 1000 / limit.rate)
            if ms > wait then
                wait, worst, by = ms, e, limit
            end
        end
    end
    if wait > 0 then
        ngx.log(config.levels[2], "delaying request", dry, ", excess: ", milli(worst),
            ", by zone \"", by.name, "\"")
        if not config.dry_run then
            ngx.sleep(wait / 1000)
        end
    end
    return nil
end

return _M
