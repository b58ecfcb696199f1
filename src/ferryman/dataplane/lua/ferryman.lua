-- ferryman's side inside NGINX: routing, certificates and load balancing from
-- tables ferryman pushes over a unix socket, so no resource change needs a reload.
--
-- POST /push, body:
--   line 1:   <version> [full]                  ("full" replaces everything)
--   E\t<backend key>\t<addr>#<port> ...        endpoint set   (empty: remove)
--   H\t<host>\t<tls> <redirect>[:<http>:<https>] <default> <balancing> <E|P>|<path>|<backend> ...   virtual host
--   C\t<certificate id>\t<base64 PEM chain>\t<base64 PEM key>          certificate
--   V\t<host>\t<redirect> U|... R|...           VirtualServer routing of a host
--   M\t<host>\t<verify> <depth> <id> <CAs> [<CRL>]  client certificates (ferryman_mtls)
--   F\t<host>\t1 u ... l ...                  VirtualServer routes the module serves
--   W\t<address>:<port>/<name>\t<cert> <listener> <V record>   a Gateway listener's
--                                              routing (ferryman_gateway)
--   K\t<address>:<port>#<listener>\t<mode> <depth> <id> <CAs>   a Gateway listener's
--                                              client certificates (ferryman_gateway_mtls)
--   S, T: TransportServers and their certificates (ngx_stream_ferryman_module)
--   X\t<as W>\t<F record or ->   its routes the module serves (ferryman_records.lua stores them)
-- ferryman.configs.routes documents the host record and holds the reference
-- implementation of the path matching done here. A VirtualServer host has an H
-- record without routes (so Lua's fast path hands all its requests to the slow
-- path) and a V record, which the module never receives:
-- ferryman.kinds.virtualserver.records.virtualserver documents it, ferryman_vs.lua routes with it
-- (ferryman.kinds.virtualserver.records.locations is the reference). Its F record gives the module
-- the routes it serves itself (ferryman.kinds.virtualserver.records.fast); it hands the others
-- to the slow path. An Ingress host with Policies is written the same way, its
-- V record starting with "I" (ferryman_ingress), with no F record.
--
-- Records live in the shared dict "ferryman" (it survives reloads). Each worker
-- decodes what it needs and drops its copies when the dict's version moves, so a
-- pushed version is in force for every worker's next request; GET /version says
-- which version the dict holds.
--
-- Two paths per request. The fast one is the whole of most requests: the
-- balancer of the shared upstream routes and picks the peer (no coroutine, no
-- ngx.ctx), because every Lua phase a request passes costs a few percent of
-- NGINX's throughput. Whatever that path does not finish (no route, no ready
-- endpoint, a redirect, least_conn, the health URI) fast_check() in the access
-- phase hands to the slow path, the named location @ferryman: route() there
-- answers or proxies with balance() and log(). (Handing over from the balancer
-- would take a 500, after which NGINX closes the connection whatever the
-- answer.) With ngx_http_ferryman_module loaded, the module is the fast path
-- and hands over the same way, in C.
--
-- This file holds the host and endpoint-set caches, routing and the entry
-- points the templates call (ferryman.<name>()); the rest is in modules it
-- wires up: ferryman_balancer (peer choice, passive health, balance(), log()),
-- ferryman_certificates (the C records and certificate() for handshakes),
-- ferryman_filters (header_filter(), body_filter()), ferryman_records (the
-- push socket). Entry points that live there are the same functions, and the
-- fast path holds what it calls as upvalues: no call costs more for the split.

local balancer = require("ngx.balancer")
local virtual_servers = require("ferryman_vs")
local mtls = require("ferryman_mtls")
local guarded_ingress = require("ferryman_ingress")
local gateways = require("ferryman_gateway")
local gateway_mtls = require("ferryman_gateway_mtls")
local records = require("ferryman_records")
local certificates = require("ferryman_certificates")
local balancing = require("ferryman_balancer")
local connections = require("ferryman_policy_conn")
local filters = require("ferryman_filters")
local upstream_fields = require("ferryman_vs_upstream")
local custom_errors = require("ferryman_custom_errors")

local store = ngx.shared.ferryman
local counters = ngx.shared.ferryman_balancer
-- Upvalues, as when they were local functions here: the fast path calls them
-- directly (ferryman_balancer).
local choose, use, tried_peers = balancing.choose, balancing.use, balancing.tried_peers

local _M = {}

local settings = { latency = false, body_limit = 1024 * 1024 }

-- From init_by_lua: latency = true when the access log feeds latency metrics,
-- which then need the route's names in NGINX variables.
function _M.configure(options)
    settings.latency = options.latency and true or false
    settings.body_limit = options.body_limit or 1024 * 1024
    upstream_fields.configure(settings.body_limit)
end

local cache_version = nil
local peers_cache = {}
local hosts_cache = {}
-- Unknown names are cached too (as NONE); they come from clients (Host, SNI),
-- so the bytes they take are bounded (a table slot and a string, ~64 bytes,
-- plus the name), as in the module (FERRYMAN_MAX_UNKNOWN_BYTES). Only names a
-- virtual host could have are looked up at all (possible_host).
local unknown_bytes = 0
local MAX_UNKNOWN_BYTES = 4 * 1024 * 1024
local ENTRY_BYTES = 64
-- RFC 1035's longest name; validated virtual host names are never longer.
local MAX_HOST_NAME = 253
-- Matched paths per host (see route_of), bounded in bytes across all hosts.
local cached_route_bytes = 0
local routes_generation = 0
local MAX_CACHED_ROUTE_BYTES = 4 * 1024 * 1024
local MAX_CACHED_PATH = 256

local function refresh()
    local version = store:get("version")
    if version ~= cache_version then
        peers_cache = {}
        hosts_cache = {}
        unknown_bytes = 0
        cached_route_bytes = 0
        cache_version = version
        gateways.reset()
    end
end

local function split(text, sep)
    local out = {}
    for part in string.gmatch(text, "[^" .. sep .. "]+") do
        out[#out + 1] = part
    end
    return out
end

-- A peer is { addr, port, id, failure counter key, active counter key, name };
-- the keys are built once here rather than per request.
local function peers_for(key)
    local peers = peers_cache[key]
    if peers == nil then
        peers = { rr = "rr:" .. key }
        local raw = store:get("E:" .. key)
        if raw then
            for addr, port in string.gmatch(raw, "([^%s#]+)#(%d+)") do
                local id = addr .. "#" .. port
                -- As NGINX names the peer in $upstream_addr.
                local name = (string.find(addr, ":", 1, true) and "[" .. addr .. "]" or addr)
                    .. ":" .. port
                peers[#peers + 1] = { addr, tonumber(port), id, "f:" .. id, "a:" .. id, name }
            end
        end
        peers_cache[key] = peers
    end
    return peers
end

-- externalAuth's subrequests are balanced over a Service's endpoints too.
local external_auth = require("ferryman_policy_external")
external_auth.peers_for = peers_for

local NONE = {}

-- A host's listeners field ("a,b", "-" for none, "0" for the default ports'
-- listener "") as a set; nil stays nil (the default ports only).
local function listener_set(field)
    if field == nil then
        return nil
    end
    local set = {}
    for name in string.gmatch(field, "[^,]+") do
        set[name == "0" and "" or name] = true
    end
    return set
end

-- The port plain HTTP is redirected to: the first of an Ingress's
-- listen-ports-ssl (named by their numbers), nil for the default HTTPS port.
local function redirect_port(field)
    local first = field and string.match(field, "^(%d+)")
    if first == nil or first == "0" then
        return nil
    end
    return first
end

local function host_entry(host)
    local entry = hosts_cache[host]
    if entry == nil then
        local raw = store:get("H:" .. host)
        if raw == nil then
            entry = NONE
            unknown_bytes = unknown_bytes + ENTRY_BYTES + #host
            if unknown_bytes > MAX_UNKNOWN_BYTES then
                hosts_cache = {}
                unknown_bytes = ENTRY_BYTES + #host
            end
        else
            local fields = split(raw, " ")
            local method, max_fails, fail_timeout =
                string.match(fields[4] or "", "^(%a+):(%d+):([%d.]+)$")
            -- "<0|1>[:<http listeners>:<https listeners>]": a host served on
            -- GlobalConfiguration listeners, or an Ingress's listen-ports,
            -- names them, comma-separated ("-": none; "0": the default
            -- ports, whose listener is ""), else it is served on the default
            -- ports only.
            local redirect, listen_http, listen_https =
                string.match(fields[2] or "", "^(%d):([^:]+):([^:]+)$")
            entry = {
                key = host,
                tls = fields[1],
                redirect = (redirect or fields[2]) == "1",
                -- nil: the default ports only; else sets of listener names
                listen_http = listener_set(listen_http),
                listen_https = listener_set(listen_https),
                -- NIC redirects to the first HTTPS port (listen-ports-ssl).
                https_port = redirect_port(listen_https),
                default = fields[3] ~= "-" and fields[3] or nil,
                least_conn = method == "lc",
                max_fails = tonumber(max_fails) or 1,
                fail_timeout = tonumber(fail_timeout) or 10,
                exact = {},
                prefix = {},
            }
            for i = 5, #fields do
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

-- Whether a name could be a virtual host's (a validated DNS name, lowercase
-- as $host is): any other is neither looked up nor cached, so clients cannot
-- fill the cache with names no host has.
local function possible_host(host)
    return #host <= MAX_HOST_NAME and string.find(host, "^[a-z0-9.-]+$") ~= nil
end

-- Exact host, then the wildcard covering exactly one more label.
local function named_host(host)
    -- Known names are answered from the cache without the check (a pattern
    -- would keep LuaJIT from compiling the fast path).
    if hosts_cache[host] == nil and not possible_host(host) then
        return nil
    end
    local entry = host_entry(host)
    if entry == nil then
        local suffix = string.match(host, "^[^.]+(%..+)$")
        if suffix then
            entry = host_entry("*" .. suffix)
        end
    end
    return entry
end

-- The virtual host serving a request: its name's, else the catch-all "_";
-- nil when the request came in on a listener the host is not served on
-- ($ferryman_listener: configs/http_listeners.py; nil where no map defines it).
local function vhost(host)
    local entry = named_host(host) or host_entry("_")
    if entry == nil then
        return nil
    end
    local var = ngx.var
    local listener = var.ferryman_listener or ""
    if entry.listen_http == nil then
        -- The default ports' listener is "".
        return listener == "" and entry or nil
    end
    local want = var.https == "on" and entry.listen_https or entry.listen_http
    return want[listener] and entry or nil
end

local SLASH = string.byte("/")
local byte, sub = string.byte, string.sub

-- configs/routes.py::match, without patterns (LuaJIT compiles byte/sub, not
-- gsub/match): Exact, then Prefix element by element, longest first.
local function match(entry, path)
    local backend = entry.exact[path]
    if backend then
        return backend
    end
    local prefix = entry.prefix
    local last = #path
    while last > 0 and byte(path, last) == SLASH do
        last = last - 1
    end
    while last > 0 do
        backend = prefix[sub(path, 1, last)]
        if backend then
            return backend
        end
        -- Drop the last element: back to the slash before it, exclusive.
        while last > 0 and byte(path, last) ~= SLASH do
            last = last - 1
        end
        last = last - 1
    end
    return prefix["/"] or entry.default
end

-- A path's match is kept per host until the dict's version moves: repeated
-- paths then cost one lookup, and the fast path has no loop, which keeps
-- LuaJIT compiling it (a loop inside aborts the trace of the whole request).
local function route_of(entry, path)
    if entry.routes_generation ~= routes_generation then
        entry.routes = {}
        entry.routes_generation = routes_generation
    end
    local backend = entry.routes[path]
    if backend == nil then
        backend = match(entry, path) or false
        if #path <= MAX_CACHED_PATH then
            if cached_route_bytes >= MAX_CACHED_ROUTE_BYTES then
                routes_generation = routes_generation + 1
                cached_route_bytes = 0
                entry.routes = {}
                entry.routes_generation = routes_generation
            end
            entry.routes[path] = backend
            cached_route_bytes = cached_route_bytes + ENTRY_BYTES + #path
        end
    end
    return backend or nil
end

-- The route of this request for the fast path: nil when the slow path must
-- answer (see the top of this file).
local function fast_route()
    refresh()
    local var = ngx.var
    local entry = vhost(var.host)
    if entry == nil or entry.least_conn or (entry.redirect and var.https ~= "on") then
        return nil
    end
    local backend = route_of(entry, var.uri)
    if backend == nil then
        return nil
    end
    local peers = peers_for(backend)
    if #peers == 0 then
        return nil
    end
    return entry, backend, peers
end

-- Methods that carry no body in practice: an HTTP/2 request of another
-- method without a Content-Length may stream one.
local NO_BODY = { GET = true, HEAD = true }

-- A body the server's limit does not allow, or may not (no length): "location
-- /" takes any body, so such a request is the slow path's, which knows each
-- route's limit (ferryman_vs_upstream.check_body).
local function body_beyond_default()
    local limit = settings.body_limit
    if limit == 0 then
        return false
    end
    local var = ngx.var
    local length = tonumber(var.content_length)
    if length then
        return length > limit
    end
    return var.http_transfer_encoding ~= nil
        or (var.http2 ~= "" and not NO_BODY[ngx.req.get_method()])
end

-- access_by_lua of the fast path's location (without the module): what the
-- balancer will not proxy goes to the slow path now, keeping the connection.
function _M.fast_check()
    if fast_route() == nil or body_beyond_default() then
        return ngx.exec("@ferryman")
    end
end

-- balancer_by_lua of the fast upstream: the whole per-request work of a proxied
-- request on a round-robin host.
function _M.fast()
    local entry, backend, peers = fast_route()
    if entry == nil then
        -- A push since fast_check(): to the slow path, through
        -- `error_page 500 = @ferryman`.
        return ngx.exit(ngx.ERROR)
    end
    if balancer.get_last_failure() ~= nil then
        -- The previous attempt failed to connect: count it, try another peer.
        local tried, previous = tried_peers(peers)
        if previous and entry.max_fails > 0 then
            counters:incr(previous[4], 1, 0, entry.fail_timeout)
        end
        local peer = choose(peers, entry, tried)
        if peer == nil or tried[peer[3]] then
            return ngx.exit(ngx.ERROR)
        end
        return use(peer)
    end
    if #peers > 1 then
        -- A failed connect moves on to another peer, each tried once.
        balancer.set_more_tries(#peers - 1)
    end
    if settings.latency then
        local var = ngx.var
        var.ferryman_backend = backend
        var.ferryman_vhost = entry.key
    end
    return use(choose(peers, entry, nil))
end

-- A host's VirtualServer routing (decoded V record), false when it has none;
-- kept on the host's cached entry, dropped with it when the version moves.
local function vs_of(entry)
    local vs = entry.vs
    if vs == nil then
        local raw = store:get("V:" .. entry.key)
        if raw and string.sub(raw, 1, 2) == "I " then
            -- An Ingress host with Policies (ferryman_ingress).
            vs = guarded_ingress.decode(raw)
            vs.ingress = true
        else
            vs = raw and virtual_servers.decode(raw) or false
        end
        entry.vs = vs
    end
    return vs
end

-- The slow path's hand-over to its balancer, which runs for this same
-- request: the endpoint set of backend key, named for the access log, and
-- host, the fields balance() follows (a host entry or a VirtualServer
-- upstream); 503 when the set has no endpoint, unless the upstream names a
-- backend serving then (ingress-nginx's default-backend annotation).
local function proxy_to(key, entry, host)
    local peers = peers_for(key)
    if #peers == 0 and host.fallback then
        key = host.fallback
        peers = peers_for(key)
    end
    if #peers == 0 then
        return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
    end
    if host.error_codes and key ~= host.fallback then
        custom_errors.intercept(host)
    end
    ngx.var.ferryman_backend = key
    ngx.var.ferryman_vhost = entry.key
    local ctx = ngx.ctx
    ctx.ferryman_peers = peers
    ctx.ferryman_host = host
end

-- The slow path for a VirtualServer host: ferryman_vs answers or names the
-- upstream, whose peers balance() then chooses from.
local function vs_route(entry, vs)
    local upstream = virtual_servers.route(vs)
    if upstream == nil then
        return -- answered
    end
    return proxy_to(upstream.key, entry, upstream)
end

-- The ConfigMap's default-server-return for hosts nobody routes (NIC's
-- default server's "return"): "CODE", "CODE TEXT" or "CODE URL" for a
-- redirect, checked by ferryman.resources.configmap; "" is NGINX's 404.
local REDIRECTS = { [301] = true, [302] = true, [303] = true, [307] = true, [308] = true }
-- The value in force, decoded once (nginx.conf holds one; a change reloads).
local return_encoded, return_code, return_rest

local function default_return(encoded)
    if encoded == nil or encoded == "" then
        return ngx.exit(ngx.HTTP_NOT_FOUND)
    end
    if encoded ~= return_encoded then
        local code, rest = string.match(ngx.decode_base64(encoded) or "404", "^(%d+) ?(.*)$")
        return_encoded, return_code, return_rest = encoded, tonumber(code) or 404, rest or ""
    end
    local code, rest = return_code, return_rest
    if REDIRECTS[code] and rest ~= "" then
        return ngx.redirect(rest, code)
    end
    if rest == "" then
        return ngx.exit(code)
    end
    ngx.status = code
    ngx.header["Content-Type"] = "text/plain"
    ngx.print(rest)
    return ngx.exit(code)
end

-- The slow path's access phase: answers what the fast path does not proxy.
function _M.route()
    refresh()
    local host = ngx.var.host
    local entry = vhost(host)
    if entry == nil then
        -- NIC's --health-status: answered for hosts nobody routes.
        local health = ngx.var.ferryman_health_uri
        if health ~= "" and ngx.var.uri == health then
            ngx.header["Content-Type"] = "text/plain"
            ngx.say("healthy")
            return ngx.exit(ngx.HTTP_OK)
        end
        return default_return(ngx.var.ferryman_default_return)
    end
    mtls.check(store, entry, host)
    local vs = vs_of(entry)
    local routing = entry
    if vs and vs.ingress then
        if guarded_ingress.failed(vs) then
            return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
        end
        routing = vs
    end
    -- Also an Ingress host on the VirtualServer engine (ferryman.kinds.ingress.records.as_virtualserver).
    if entry.redirect and ngx.var.scheme == "http" then
        local port = entry.https_port or ngx.var.ferryman_https_port
        local authority = port == "443" and host or (host .. ":" .. port)
        return ngx.redirect("https://" .. authority .. ngx.var.request_uri, 301)
    end
    if vs and not vs.ingress then
        return vs_route(entry, vs)
    end
    local backend = match(routing, ngx.var.uri)
    if routing ~= entry then
        guarded_ingress.enforce(routing, backend)
    end
    if backend == nil then
        return ngx.exit(ngx.HTTP_NOT_FOUND)
    end
    upstream_fields.check_body(nil) -- the server's limit
    return proxy_to(backend, entry, entry)
end

-- The Gateway server's access phase (nginx.conf.tmpl): the listener's
-- routing for the request's address, port and name, else 404.
function _M.gateway_route()
    refresh()
    local var = ngx.var
    local address, port, host = var.server_addr, var.server_port, var.host
    local hopped = var.proxy_protocol_server_port
    if hopped and hopped ~= "" then
        -- Through the stream block's hop (Debian's 1.22, h2c): the socket the
        -- client connected to, from the PROXY protocol (nginx.conf.tmpl).
        address, port = var.proxy_protocol_server_addr, hopped
    end
    local entry = gateways.lookup(store, address, port, host)
    if var.https == "on" then
        -- Another listener than its SNI name's serves this Host: misdirected (HTTP/2
        -- reuses connections); without SNI, when that listener verifies clients.
        local name = string.lower(var.ssl_server_name or "")
        if name ~= host then
            local by_name = gateways.lookup(store, address, port, name)
            if by_name and (entry == nil or entry.listener ~= by_name.listener)
                and (name ~= "" or gateway_mtls.validated(store, entry)) then
                return ngx.exit(421)
            end
        end
    end
    if entry == nil then
        return ngx.exit(ngx.HTTP_NOT_FOUND)
    end
    return vs_route(entry, entry.vs)
end

-- balancer_by_lua of a RequestMirror copy (nginx.conf.tmpl): a peer of the
-- upstream the route named in $ferryman_mirror_<index>, which a mirror
-- subrequest shares with its request.
function _M.balance_mirror(index)
    local key = ngx.var["ferryman_mirror_" .. index]
    local peers = key and key ~= "" and peers_for(key) or nil
    if peers == nil or #peers == 0 then
        return ngx.exit(ngx.HTTP_SERVICE_UNAVAILABLE)
    end
    return use(peers[math.random(#peers)])
end

-- The slow path's response filters (ferryman_filters).
_M.header_filter = filters.header_filter
_M.body_filter = filters.body_filter

-- The slow path's balancer and log phase (ferryman_balancer); externalAuth's
-- subrequests release their counted attempts as requests do.
_M.balance = balancing.balance
function _M.custom_error()
    return custom_errors.serve(peers_for)
end
-- The log phase also gives back limit-connections' counts (ferryman_policy_conn).
function _M.log()
    balancing.log()
    connections.leave()
end
external_auth.release = balancing.release

-- Handshakes (ferryman_certificates), which look hosts up as routing does.
certificates.bind(refresh, named_host)
_M.certificate = certificates.certificate
_M.gateway_certificate = certificates.gateway_certificate

-- The push channel and what it answers (ferryman_records).
_M.push = records.push
_M.fast_path = records.fast_path
_M.in_flight = records.in_flight
_M.version = records.version

return _M
