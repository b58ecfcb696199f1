-- The push channel (POST /push on ferryman's unix socket; the grammar is at
-- the top of ferryman.lua): records into the shared dict and, for those the
-- C module routes with, into ngx_http_ferryman_module's zone; and what that
-- socket answers besides (GET /version, /fast-path, /in-flight).

local flights = require("ferryman_in_flight")

local store = ngx.shared.ferryman

-- ngx_http_ferryman_module (dataplane/module), when NGINX loaded it: push()
-- hands it the virtual hosts and endpoint sets its fast path routes with.
-- NGINX loads modules with RTLD_GLOBAL, so LuaJIT's ffi.C finds its functions.
local ffi = require("ffi")
local native = nil
do
    ffi.cdef([[
        int ngx_http_ferryman_put(const char *key, size_t key_len,
                                  const char *value, size_t value_len);
        int ngx_http_ferryman_flush(void);
        int ngx_http_ferryman_commit(void);
        int ngx_http_ferryman_counts(uint64_t *proxied, uint64_t *handed_over);
        int ngx_http_ferryman_in_flight(const char *peer, size_t len, char *name,
                                        size_t *name_len, uint64_t *count);
    ]])
    local found = pcall(function()
        return ffi.C.ngx_http_ferryman_put
    end)
    if found then
        native = ffi.C
    end
end
-- ngx_http_ferryman_put's answers (the module's FERRYMAN_* codes).
local NATIVE_NO_ZONE, NATIVE_NO_MEMORY, NATIVE_BAD_KEY = 1, 2, 3
local native_counts = native and ffi.new("uint64_t[2]")
-- A module built before it counted requests in flight lacks the function.
local native_in_flight = nil
if native and pcall(function()
    return native.ngx_http_ferryman_in_flight
end) then
    native_in_flight = native.ngx_http_ferryman_in_flight
end

local _M = {}

-- The end of the dict is kept: virtual hosts and certificates larger than
-- LARGE_RECORD bytes may not use its last LARGE_RESERVE, smaller ones not its
-- last SMALL_RESERVE; endpoint sets may use all of it. So when one tenant's big
-- records fill the memory, other tenants' ordinary Ingresses still go live and
-- endpoint changes (traffic to pods that are gone) still go through. Fractions
-- of the dict's capacity.
local LARGE_RECORD = 4096
local LARGE_RESERVE, SMALL_RESERVE = 0.1, 0.02

-- Stores one record in the dict and, for hosts and endpoint sets, in the
-- module's zone. Returns nil, or why it was refused (the push answer's codes,
-- ferryman.dataplane): a refused record is removed from both, so neither keeps
-- a value the other lost (a failed safe_set may already have dropped the old
-- one), and the rest of the push goes on.
local function store_record(module, kind, name, value)
    if kind == "X" then
        -- A Gateway listener's routes for the module (beside its W record,
        -- ngx_http_ferryman_gateway.c): in its zone only, as Lua routes by
        -- the W record. Never refused: a module that cannot hold one sends
        -- every Gateway request to Lua until the next full push, and one
        -- that does not read X records ignores them.
        if module then
            module.ngx_http_ferryman_put(name, #name, value, #value)
        end
        return nil
    end
    -- The module holds what it routes with: H, E and F (VirtualServer routes
    -- it serves itself, ferryman.kinds.virtualserver.records.fast) records, and S and T
    -- (TransportServers and their certificates, for ngx_stream_ferryman_module).
    if kind ~= "H" and kind ~= "E" and kind ~= "F" and kind ~= "S" and kind ~= "T" then
        module = nil
    end
    if value == "" then
        store:delete(name)
        if module and kind ~= "C" then
            module.ngx_http_ferryman_put(name, #name, value, 0)
        end
        return nil
    end
    local free_before = store:free_space()
    local ok, err = store:safe_set(name, value)
    local problem = nil
    if not ok then
        problem = err == "no memory" and "no_memory" or ("dict: " .. tostring(err))
    elseif kind ~= "E" then
        local free = store:free_space()
        local reserve = #value > LARGE_RECORD and LARGE_RESERVE or SMALL_RESERVE
        if free < free_before and free < reserve * store:capacity() then
            problem = "reserved"
        end
    end
    if problem == nil and module and kind ~= "C" then
        local rc = module.ngx_http_ferryman_put(name, #name, value, #value)
        if rc == NATIVE_NO_MEMORY then
            problem = "fast_zone_full"
        elseif rc == NATIVE_BAD_KEY then
            problem = "bad_key"
        end
    end
    if problem then
        store:delete(name)
        if module and kind ~= "C" then
            module.ngx_http_ferryman_put(name, #name, "", 0)
        end
    end
    return problem
end

-- POST /push. The answer: the version now in force, then "M\t<store>\t<fill
-- ratio>" for the dict, then "R\t<kind>\t<key>\t<code>" for each record that
-- was refused; every other record is in force. A malformed body is refused as
-- a whole (400): ferryman's encoder never sends one.
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
    local records = {}
    for line in string.gmatch(rest, "[^\n]+") do
        local kind, key, value = string.match(line, "^([EHCVMFSTWKX])\t([^\t]+)\t?(.*)$")
        if kind == nil then
            ngx.status = ngx.HTTP_BAD_REQUEST
            ngx.say("bad record: ", string.sub(line, 1, 80))
            return
        end
        records[#records + 1] = { kind, key, value }
    end
    local to_module = native
    if to_module and to_module.ngx_http_ferryman_counts(native_counts, native_counts + 1) ~= 0 then
        to_module = nil -- loaded, but this configuration has no zone for it
    end
    -- The peers of the endpoint sets this push replaces: those that leave are
    -- still asked about by GET /in-flight.
    local before = mode == "full" and flights.all_peer_ids() or nil
    if mode == "full" then
        -- flush_all only marks items expired; safe_set reclaims at most one or
        -- two of those per call, so without flush_expired a full push into a
        -- full dict would be refused.
        store:flush_all()
        store:flush_expired()
        if to_module then
            to_module.ngx_http_ferryman_flush()
        end
    end
    if store:get("version") == nil then
        -- From now on the version is replaced in place: set() never has to
        -- evict a record to make room for it.
        store:safe_set("version", 0)
    end
    local refused = {}
    -- Keys of W records refused in this push: the module holds no X record
    -- where Lua holds no W, so both look a name up past it alike.
    local no_gateway = {}
    for _, r in ipairs(records) do
        local kind, key, value = r[1], r[2], r[3]
        local name = kind .. ":" .. key
        local old = kind == "E" and before == nil and store:get(name) or nil
        if kind == "X" and no_gateway[key] then
            value = ""
        end
        local problem = store_record(to_module, kind, name, value)
        if problem then
            refused[#refused + 1] = "R\t" .. kind .. "\t" .. key .. "\t" .. problem
            if kind == "W" then
                no_gateway[key] = true
                store_record(to_module, "X", "X:" .. key, "")
            end
        end
        if old then
            flights.gone(flights.peer_ids(old), flights.peer_ids(store:get(name)))
        end
    end
    if before then
        flights.gone(before, flights.all_peer_ids())
    end
    store:set("version", tonumber(version))
    if to_module then
        to_module.ngx_http_ferryman_commit()
    end
    ngx.say(version)
    ngx.say("M\tdict\t", 1 - store:free_space() / store:capacity())
    if #refused > 0 then
        ngx.say(table.concat(refused, "\n"))
    end
end

-- GET /fast-path: "<proxied> <handed over>" requests of the module's fast
-- path (404 without the module).
function _M.fast_path()
    if native == nil or native.ngx_http_ferryman_counts(native_counts, native_counts + 1) ~= 0 then
        ngx.status = ngx.HTTP_NOT_FOUND
        ngx.say("no fast path module")
        return
    end
    ngx.say(tonumber(native_counts[0]), " ", tonumber(native_counts[1]))
end

-- GET /in-flight (ferryman_in_flight.lua says what it answers).
function _M.in_flight()
    local zone = native_in_flight ~= nil
        and native.ngx_http_ferryman_counts(native_counts, native_counts + 1) == 0
    flights.answer(zone and native_in_flight or nil)
end

function _M.version()
    ngx.say(store:get("version") or 0)
end

return _M
