-- A Gateway HTTPS listener's client certificate validation
-- (spec.tls.frontend, ferryman.kinds.gateway.records.frontend_tls), per
-- handshake, from the listener's K record instead of directives, so neither
-- the Gateway nor its CA ConfigMaps reload NGINX:
--
--   K\t<address>:<port>#<listener>\t<required|optional> <depth> <CA id> <base64 PEM CAs>
--
-- (the listener's field in its W records: its number within its socket and
-- "v", which says the K record is required; the CA id names the CAs'
-- content: parsed bundles are cached by it).
-- certificate() runs in the certificate phase, after the listener's own
-- certificate is set (ferryman_certificates.gateway_certificate): it asks the
-- client for a certificate issued by the CAs (ngx.ssl.verify_client: OpenSSL
-- verifies it in the handshake). "optional" (AllowInsecureFallback) ends
-- there: lua-nginx-module's callback lets every outcome through, as NGINX's
-- does. "required" (AllowValidOnly) hands the connection to
-- ngx_http_ferryman_client_verify_required (ngx_http_ferryman_verify.c),
-- whose callback passes OpenSSL's verdict on and which requires a
-- certificate: the handshake fails without a valid one, before any request.
-- Without the module that function is missing: the handshake is refused
-- (fail closed).

local ffi = require("ffi")
local ssl = require("ngx.ssl")
local mtls = require("ferryman_mtls")

local _M = {}

local native = nil
do
    pcall(ffi.cdef, "int ngx_http_ferryman_client_verify_required(void *ssl_conn);")
    if pcall(function()
        return ffi.C.ngx_http_ferryman_client_verify_required
    end) then
        native = ffi.C
    end
end

-- lua-resty-lrucache: by CA id (an id names immutable content).
local bundles = require("resty.lrucache").new(1000)

-- The K record of a W entry's listener: false when it has none, else
-- { required, depth, certs } (certs false: not usable). Kept on the entry
-- (ferryman_gateway drops its entries when the version moves).
local function validation_of(store, entry)
    local found = entry.client
    if found ~= nil then
        return found
    end
    -- A listener whose field ends in "v" verifies: without its K record (not
    -- pushed yet, refused) its handshakes are refused, never let through.
    local required = string.sub(entry.listener, -1) == "v"
    found = false
    local socket = string.match(entry.key, "^W:(.-)/")
    local raw = socket and store:get("K:" .. socket .. "#" .. entry.listener)
    if required and not raw then
        found = { required = true, depth = 1, certs = false }
    elseif raw then
        local mode, depth, id, cas = string.match(raw, "^(%a+) (%d+) (%S+) (%S+)$")
        local certs = id and bundles:get(id)
        if mode and not certs then
            certs = ssl.parse_pem_cert(ngx.decode_base64(cas) or "")
            if certs then
                bundles:set(id, certs)
            end
        end
        found = {
            required = mode ~= "optional",
            depth = tonumber(depth) or 1,
            certs = certs or false,
        }
    end
    entry.client = found
    return found
end

-- Whether the listener of W entry ``entry`` (nil: none) verifies client
-- certificates: a request without SNI on a connection another listener's
-- handshake made is then misdirected (ferryman.gateway_route), as one whose
-- SNI names another listener is.
function _M.validated(store, entry)
    return entry ~= nil and validation_of(store, entry) ~= false
end

-- ssl_certificate_by_lua: false when the handshake must be refused (the CAs
-- are not usable, OpenSSL refused them: fail closed).
function _M.certificate(store, entry)
    local validation = validation_of(store, entry)
    if not validation then
        return true
    end
    if not validation.certs then
        ngx.log(ngx.ERR, "ferryman: the client CA bundle of ", entry.key, " is not usable")
        return false
    end
    local connection = mtls.ask(entry.key, validation.certs, validation.depth)
    if connection == nil then
        return false
    end
    if validation.required then
        if native == nil or native.ngx_http_ferryman_client_verify_required(connection) ~= 0 then
            ngx.log(ngx.ERR, "ferryman: cannot require client certificates for ", entry.key)
            return false
        end
    end
    return true
end

return _M
