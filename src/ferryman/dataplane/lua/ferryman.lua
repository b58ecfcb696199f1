-- ferryman's side inside NGINX: routing, certificates and load balancing from
-- tables ferryman pushes over a unix socket, so no resource change needs a reload.
--
-- POST /push, body:
--   line 1:   <version> [full]                  ("full" replaces everything)
--   E\t<backend key>\t<addr>#<port> ...        endpoint set   (empty: remove)
--   H\t<host>\t<tls> <redirect> <default> <E|P>|<path>|<backend> ...   virtual host
--   C\t<certificate id>\t<base64 PEM chain>\t<base64 PEM key>          certificate
-- ferryman.configs.routes documents the host record and holds the reference
-- implementation of the path matching done here.
--
-- Records live in the shared dict "ferryman" (it survives reloads). Each worker
-- decodes what it needs and drops its copies when the dict's version moves, so a
-- pushed version is in force for every worker's next request; GET /version says
-- which version the dict holds.

local balancer = require("ngx.balancer")
local ssl = require("ngx.ssl")

local store = ngx.shared.ferryman
local counters = ngx.shared.ferryman_balancer

local _M = {}

local cache_version = nil
local peers_cache = {}
local hosts_cache = {}
local certs_cache = {} -- by certificate id; an id names immutable content
local certs_cached = 0
local MAX_CACHED_CERTS = 1000

local function refresh()
    local version = store:get("version")
    if version ~= cache_version then
        peers_cache = {}
        hosts_cache = {}
        cache_version = version
    end
end

local function split(text, sep)
    local out = {}
    for part in string.gmatch(text, "[^" .. sep .. "]+") do
        out[#out + 1] = part
    end
    return out
end

local function peers_for(key)
    local peers = peers_cache[key]
    if peers == nil then
        peers = {}
        local raw = store:get("E:" .. key)
        if raw then
            for addr, port in string.gmatch(raw, "([^%s#]+)#(%d+)") do
                peers[#peers + 1] = { addr, tonumber(port) }
            end
        end
        peers_cache[key] = peers
    end
    return peers
end

local NONE = {}

local function host_entry(host)
    local entry = hosts_cache[host]
    if entry == nil then
        local raw = store:get("H:" .. host)
        if raw == nil then
            entry = NONE
        else
            local fields = split(raw, " ")
            entry = {
                tls = fields[1],
                redirect = fields[2] == "1",
                default = fields[3] ~= "-" and fields[3] or nil,
                exact = {},
                prefix = {},
            }
            for i = 4, #fields do
                local kind, path, backend = string.match(fields[i], "^(%u)|([^|]+)|(.+)$")
                if kind == "E" then
                    entry.exact[path] = backend
                elseif kind == "P" then
                    entry.prefix[path] = backend
                end
            end
        end
        hosts_cache[host] = entry
    end
    if entry == NONE then
        return nil
    end
    return entry
end

-- Exact host, then the wildcard covering exactly one more label.
local function named_host(host)
    local entry = host_entry(host)
    if entry == nil then
        local suffix = string.match(host, "^[^.]+(%..+)$")
        if suffix then
            entry = host_entry("*" .. suffix)
        end
    end
    return entry
end

local function match(entry, path)
    local backend = entry.exact[path]
    if backend then
        return backend
    end
    local candidate = string.gsub(path, "/+$", "")
    if candidate == "" then
        candidate = "/"
    end
    while true do
        backend = entry.prefix[candidate]
        if backend then
            return backend
        end
        if candidate == "/" then
            return entry.default
        end
        candidate = string.match(candidate, "^(.*)/[^/]*$")
        if candidate == "" then
            candidate = "/"
        end
    end
end

function _M.route()
    refresh()
    local host = ngx.var.host
    local entry = named_host(host) or host_entry("_")
    if entry == nil then
        return ngx.exit(ngx.HTTP_NOT_FOUND)
    end
    if entry.redirect and ngx.var.scheme == "http" then
        local port = ngx.var.ferryman_https_port
        local authority = port == "443" and host or (host .. ":" .. port)
        return ngx.redirect("https://" .. authority .. ngx.var.request_uri, 301)
    end
    local backend = match(entry, ngx.var.uri)
    if backend == nil then
        return ngx.exit(ngx.HTTP_NOT_FOUND)
    end
    local peers = peers_for(backend)
    if #peers == 0 then
        return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
    end
    ngx.var.ferryman_backend = backend
    -- The balancer runs for this same request: hand it the set chosen here.
    local ctx = ngx.ctx
    ctx.ferryman_backend = backend
    ctx.ferryman_peers = peers
end

function _M.balance()
    local ctx = ngx.ctx
    local key = ctx.ferryman_backend
    local peers = ctx.ferryman_peers
    local n = peers and #peers or 0
    if n == 0 then
        return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
    end
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

local function certificate_pair(id)
    local pair = certs_cache[id]
    if pair then
        return pair
    end
    local raw = store:get("C:" .. id)
    if raw == nil then
        return nil
    end
    local chain_b64, key_b64 = string.match(raw, "^(%S+)\t(%S+)$")
    local chain = chain_b64 and ssl.parse_pem_cert(ngx.decode_base64(chain_b64))
    local key = key_b64 and ssl.parse_pem_priv_key(ngx.decode_base64(key_b64))
    if not chain or not key then
        ngx.log(ngx.ERR, "ferryman: certificate ", id, " does not parse")
        return nil
    end
    if certs_cached >= MAX_CACHED_CERTS then
        certs_cache = {}
        certs_cached = 0
    end
    pair = { chain, key }
    certs_cache[id] = pair
    certs_cached = certs_cached + 1
    return pair
end

function _M.certificate()
    refresh()
    local name = ssl.server_name()
    local entry = name and named_host(string.lower(name))
    local pair = entry and entry.tls ~= "-" and entry.tls ~= "!" and certificate_pair(entry.tls)
    if not pair then
        -- No certificate for this name: refuse the handshake (unrecognized_name).
        return ngx.exit(ngx.ERROR)
    end
    ssl.clear_certs()
    local ok, err = ssl.set_cert(pair[1])
    if ok then
        ok, err = ssl.set_priv_key(pair[2])
    end
    if not ok then
        ngx.log(ngx.ERR, "ferryman: cannot use certificate for ", name, ": ", err)
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
        store:flush_all()
    end
    for line in string.gmatch(rest, "[^\n]+") do
        local kind, key, value = string.match(line, "^([EHC])\t([^\t]+)\t?(.*)$")
        if kind == nil then
            ngx.status = ngx.HTTP_BAD_REQUEST
            ngx.say("bad record: ", string.sub(line, 1, 80))
            return
        end
        if value == "" then
            store:delete(kind .. ":" .. key)
        else
            local ok, err = store:safe_set(kind .. ":" .. key, value)
            if not ok then
                ngx.status = ngx.HTTP_INSUFFICIENT_STORAGE
                ngx.say("cannot store ", key, ": ", err)
                return
            end
        end
    end
    store:set("version", tonumber(version))
    ngx.say(version)
end

function _M.version()
    ngx.say(store:get("version") or 0)
end

return _M
