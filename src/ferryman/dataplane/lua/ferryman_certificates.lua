-- TLS certificates in ssl_certificate_by_lua (nginx.conf.tmpl): the C records
-- ("C\t<id>\t<base64 PEM chain>\t<base64 PEM key>", grammar at the top of
-- ferryman.lua), parsed once per worker, and the choice of one by the SNI name:
-- the virtual host's (certificate) or the Gateway HTTPS listener's
-- (gateway_certificate). Its own module because it runs once per handshake,
-- never on a request's path, and its cache serves nothing else.
-- ferryman.lua binds the host look-up it shares with routing (bind), so a
-- handshake and the requests after it see the same version of the records.

local ssl = require("ngx.ssl")
local mtls = require("ferryman_mtls")
local gateways = require("ferryman_gateway")
local gateway_mtls = require("ferryman_gateway_mtls")

local store = ngx.shared.ferryman

local _M = {}

-- ferryman.lua's: drop the worker's decoded records when the dict's version
-- moved; the virtual host of a name (exact, then the one-label wildcard).
local refresh, named_host

function _M.bind(refresh_records, host_of_name)
    refresh, named_host = refresh_records, host_of_name
end

-- lua-resty-lrucache (installed with lua-resty-core): when full it drops the
-- least recently used entry, not every entry, so a burst of new keys does not
-- cost every other one its parse.
-- By certificate id (an id names immutable content).
local certs_cache = require("resty.lrucache").new(1000)

local function certificate_pair(id)
    local pair = certs_cache:get(id)
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
    pair = { chain, key }
    certs_cache:set(id, pair)
    return pair
end

-- --default-server-tls-secret's pair (the record "C:!default", same grammar,
-- translators/desired.py): its key names no content, so the pair is kept with
-- the text it was parsed from and parsed again when that changes.
local default_raw, default_pair

local function default_certificate()
    local raw = store:get("C:!default")
    if raw == nil then
        return nil
    end
    if raw ~= default_raw then
        local chain_b64, key_b64 = string.match(raw, "^(%S+)\t(%S+)$")
        local chain = chain_b64 and ssl.parse_pem_cert(ngx.decode_base64(chain_b64))
        local key = key_b64 and ssl.parse_pem_priv_key(ngx.decode_base64(key_b64))
        if not chain or not key then
            ngx.log(ngx.ERR, "ferryman: the default certificate does not parse")
            return nil
        end
        default_raw, default_pair = raw, { chain, key }
    end
    return default_pair
end

-- Makes pair the handshake's certificate; false (after logging why OpenSSL
-- refused it) when it cannot be.
local function serve(pair, name)
    ssl.clear_certs()
    local ok, err = ssl.set_cert(pair[1])
    if ok then
        ok, err = ssl.set_priv_key(pair[2])
    end
    if not ok then
        ngx.log(ngx.ERR, "ferryman: cannot use certificate for ", name, ": ", err)
        return false
    end
    return true
end

-- The shared HTTPS server's certificate: its SNI name's virtual host's, then
-- the host's client certificate settings (ferryman_mtls).
function _M.certificate()
    refresh()
    -- Learns the connection's local address once (getsockname on a wildcard
    -- listen): HTTP/2 streams copy it from here, where each stream would
    -- otherwise ask the kernel again for $server_port (X-Forwarded-Port).
    -- A resumed session skips this phase: its streams still ask.
    ssl.raw_server_addr()
    local name = ssl.server_name()
    local entry = name and named_host(string.lower(name))
    if not entry then
        -- No served host by this name (or no SNI): the default server's
        -- certificate (--default-server-tls-secret), or no handshake.
        local pair = default_certificate()
        if not pair or not serve(pair, name or "(no SNI)") then
            return ngx.exit(ngx.ERROR)
        end
        return
    end
    local pair = entry.tls ~= "-" and entry.tls ~= "!" and certificate_pair(entry.tls)
    if not pair then
        -- No certificate for this name: refuse the handshake (unrecognized_name).
        return ngx.exit(ngx.ERROR)
    end
    if not serve(pair, name) or not mtls.certificate(store, entry) then
        return ngx.exit(ngx.ERROR)
    end
end

-- The Gateway server's certificate: that of the HTTPS listener serving the
-- SNI name on this address and port, then the listener's client certificate
-- validation (ferryman_gateway_mtls); no listener, no handshake.
function _M.gateway_certificate()
    refresh()
    local name = ssl.server_name()
    local entry = gateways.lookup(
        store,
        gateways.ipv4(ssl.raw_server_addr()),
        ssl.server_port(),
        name and string.lower(name) or ""
    )
    local pair = entry and entry.tls ~= "-" and certificate_pair(entry.tls)
    if not pair or not serve(pair, name) or not gateway_mtls.certificate(store, entry) then
        return ngx.exit(ngx.ERROR)
    end
end

return _M
