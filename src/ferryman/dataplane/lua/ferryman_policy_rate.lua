-- The rateLimit Policy: NGINX's limit_req (a leaky bucket per key) over the
-- shared dict ferryman_limits, which every worker shares as NGINX's zone is.
-- Routes whose only policy is a rate limit are limited by
-- ngx_http_ferryman_module instead (ngx_http_ferryman_limit.c, the same
-- arithmetic, its own zone): kinds/virtualserver/records/fast.py gives a NIC zone to one of the
-- two only, so no bucket is counted in both.
-- P item and units: kinds/policy/records/rate.py. Arithmetic as
-- ngx_http_limit_req_module's (1.22): per key, "excess" in thousandths of a
-- request and the time of the last counted request in ms; a request adds
-- 1000 and the rate leaks it away; past burst it is refused; beyond "delay"
-- it waits (excess - delay) / rate.

local vars = require("ferryman_policy_vars")
local regex = require("ferryman_regex")
local access = require("ferryman_policy_access")

local dict = ngx.shared.ferryman_limits
local decode_base64 = ngx.decode_base64
local floor, lower = math.floor, string.lower
local find, sub = string.find, string.sub
local tonumber = tonumber

local _M = {}

-- NIC's logLevel: the level of rejections; delays are logged one lower, as
-- NGINX does (limit_req_log_level: "info" delays at "info" too).
local LEVELS = {
    info = { ngx.INFO, ngx.INFO },
    notice = { ngx.NOTICE, ngx.INFO },
    warn = { ngx.WARN, ngx.NOTICE },
    error = { ngx.ERR, ngx.WARN },
}
-- NGINX's nodelay: a delay threshold no excess reaches.
local NO_DELAY = 2 ^ 52

-- A tier's match as NGINX's map reads it: "~" a regular expression, "~*" one
-- ignoring case, else the string, caselessly.
local function map_value(text)
    if sub(text, 1, 2) == "~*" then
        return { regex = sub(text, 3), options = "ijo" }
    elseif sub(text, 1, 1) == "~" then
        return { regex = sub(text, 2), options = "jo" }
    end
    if sub(text, 1, 1) == "\\" then
        text = sub(text, 2)
    end
    return { value = lower(text) }
end

-- NGINX's map lookup: an empty value matches nothing.
local function matches(m, value)
    if value == "" then
        return false
    end
    if m.regex then
        return regex.finds("rate-limit tier", value, m.regex, m.options)
    end
    return lower(value) == m.value
end

local function limit_of(text)
    local f = {}
    for part in string.gmatch(text .. ".", "([^.]*)%.") do
        f[#f + 1] = part
    end
    local zone = decode_base64(f[1])
    local delay = tonumber(f[5])
    return {
        zone = zone,
        -- NIC's zone name, for the log lines NGINX would write.
        name = "pol_rl_" .. string.gsub(zone, "[/-]", "_") .. "_vs",
        rate = tonumber(f[2]),
        key = vars.template(decode_base64(f[3])),
        burst = tonumber(f[4]) * 1000,
        delay = delay < 0 and NO_DELAY or delay * 1000,
        variable = f[6] ~= "" and decode_base64(f[6]) or nil,
        match = f[6] ~= "" and map_value(decode_base64(f[7])) or nil,
        default = f[8] == "1",
        -- ingress-nginx's limit-allowlist: clients the limit does not apply to.
        exempt = f[9] and f[9] ~= "" and access.networks_of(decode_base64(f[9])) or nil,
    }
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
-- with add() (atomic across workers) and held for a microsecond or two by
-- another worker running on another core, so it is retried at once a while
-- before sleeping (a sleep is a timer and a millisecond).
local SPINS = 200

local function lock(id)
    local key = "\1" .. id
    for attempt = 1, SPINS + 50 do
        if dict:add(key, true, 0.1) then
            return key
        end
        if attempt > SPINS then
            ngx.sleep(0.001)
        end
    end
    return key -- held too long (a worker died holding it): go on
end

local function state(id)
    local value = dict:get(id)
    if value == nil then
        return nil
    end
    local space = find(value, " ", 1, true)
    return tonumber(sub(value, 1, space - 1)), tonumber(sub(value, space + 1))
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
            if matches(limit.match, vars.value(limit.variable, set)) then
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
        if on[limit] and not (limit.exempt and access.client_in(limit.exempt)) then
            local key = vars.render(limit.key, set)
            if limit.variable then
                key = "Val" .. key -- NIC's tiered key: never empty
            end
            -- An empty key is not limited, as NGINX's; nor, with an error,
            -- one longer than NGINX's 65535 bytes.
            if #key > 65535 then
                ngx.log(ngx.ERR, "the value of the key of zone \"", limit.name,
                    "\" is more than 65535 bytes")
            elseif key ~= "" then
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
