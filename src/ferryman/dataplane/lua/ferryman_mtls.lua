-- The ingressMTLS policy: client certificates requested and verified per
-- host, as NIC's ssl_client_certificate / ssl_crl / ssl_verify_client /
-- ssl_verify_depth in the VirtualServer's server block do, from a record
-- instead of directives, so neither a policy nor its CA Secret reloads NGINX:
--
--   M\t<host>\t<verifyClient> <verifyDepth> <bundle id> <base64 PEM CAs>[ <base64 PEM CRL>]
--   (with ingress-nginx's auth-tls-error-page: `<CRL or -> <base64 URL>` after the CAs)
--
-- (the bundle id names the CA Secret's content: parsed bundles are cached by it).
-- The certificate phase (certificate(), for the host the SNI names) asks for
-- the client's certificate with the host's CAs and depth and adds the CRL;
-- OpenSSL completes the handshake whatever the outcome, as NGINX's own
-- verification does, and the access phase (check(), for the host of the
-- request) answers as ngx_http_process_request would: 400 "No required SSL
-- certificate was sent" when `on` and none came, 400 "The SSL certificate
-- error" when it did not verify (but for the errors optional_no_ca forgives),
-- 421 when the request names another host than the handshake did.
-- Plain HTTP requests are not checked: NGINX verifies client certificates on
-- TLS connections only, so NIC's server block lets them through too.

local ffi = require("ffi")
local ssl = require("ngx.ssl")
local base = require("resty.core.base")
local C = require("ferryman_openssl")

local _M = {}

-- OpenSSL's constants (ssl.h, x509_vfy.h).
local SSL_CTRL_GET_VERIFY_CERT_STORE = 137
local SSL_OP_NO_TICKET = 0x4000ULL
local X509_V_FLAG_CRL_CHECKS = 0x4 + 0x8 -- CRL_CHECK | CRL_CHECK_ALL, as ssl_crl sets
-- The verification errors optional_no_ca lets through (NGINX's
-- ngx_ssl_verify_error_optional): the chain does not lead to a trusted CA.
local NO_CA_ERRORS = { [2] = true, [18] = true, [19] = true, [20] = true, [21] = true }
-- NGINX's codes for its two client-certificate answers (both sent as 400).
local HTTPS_CERT_ERROR, HTTPS_NO_CERT = 495, 496

-- lua-resty-lrucache (installed with lua-resty-core): when full it drops the
-- least recently used entry, not every entry, so a burst of new keys does not
-- cost every other one its parse.
-- By CA bundle id (an id names immutable content).
local bundles = require("resty.lrucache").new(1000)

local function pem_crl(pem)
    local bio = C.BIO_new_mem_buf(pem, #pem)
    if bio == nil then
        return nil
    end
    local crl = C.PEM_read_bio_X509_CRL(bio, nil, nil, nil)
    C.BIO_free(bio)
    if crl == nil then
        C.ERR_clear_error()
        return nil
    end
    return ffi.gc(crl, C.X509_CRL_free)
end

-- A bundle is { certs = <parsed chain>, crl = <X509_CRL or nil> }.
local function bundle(id, certs_b64, crl_b64)
    local found = bundles:get(id)
    if found then
        return found
    end
    local certs = ssl.parse_pem_cert(ngx.decode_base64(certs_b64) or "")
    if not certs then
        return nil
    end
    found = { certs = certs }
    if crl_b64 ~= "" then
        found.crl = pem_crl(ngx.decode_base64(crl_b64) or "")
        if found.crl == nil then
            return nil
        end
    end
    bundles:set(id, found)
    return found
end

-- The M record of a host: { mode, depth, cas = <bundle or nil> }, false when
-- it has none; kept on the host's cached entry (ferryman.lua drops it when the
-- version moves).
local function policy_of(store, entry)
    local policy = entry.mtls
    if policy == nil then
        local raw = store:get("M:" .. entry.key)
        local mode, depth, id, certs, crl, page =
            string.match(raw or "", "^(%S+) (%d+) (%S+) (%S+) ?(%S*) ?(%S*)$")
        policy = false
        if mode then
            policy = {
                mode = mode,
                depth = tonumber(depth),
                cas = bundle(id, certs, crl == "-" and "" or crl),
                error_page = page ~= "" and ngx.decode_base64(page) or nil,
            }
        end
        entry.mtls = policy
    end
    return policy
end

-- In the certificate phase: ask the client for a certificate issued by
-- ``certs`` (OpenSSL verifies it in the handshake) and issue no session
-- ticket. Returns the connection's SSL pointer, or nil when the handshake
-- must be refused (``key`` names the host or listener in the error log).
-- Ingress hosts and Gateway listeners (ferryman_gateway_mtls.lua) share it.
function _M.ask(key, certs, depth)
    local ok, err = ssl.verify_client(certs, depth)
    if not ok then
        ngx.log(ngx.ERR, "ferryman: cannot request client certificates for ", key, ": ", err)
        return nil
    end
    local connection = C.ngx_http_lua_ffi_get_req_ssl_pointer(base.get_request())
    if connection == nil then
        return nil
    end
    -- No session ticket: a resumed session skips the certificate phase and
    -- keeps its verification result, which must neither outlive a change of
    -- the CAs nor serve another host's (NGINX's tickets do not outlive the
    -- reload such a change takes there). TLS 1.2 by the option; TLS 1.3 sends
    -- its tickets after the handshake, unless told to send none.
    C.SSL_set_options(connection, SSL_OP_NO_TICKET)
    C.SSL_set_num_tickets(connection, 0)
    return connection
end

-- ssl_certificate_by_lua, after the host's certificate is set: ask for and
-- verify the client's certificate. Returns false when the handshake must be
-- refused (the host's CAs are not usable: fail closed, as a reload with a bad
-- ssl_client_certificate would not start).
function _M.certificate(store, entry)
    local policy = policy_of(store, entry)
    if not policy or policy.mode == "off" then
        return true
    end
    local cas = policy.cas
    if cas == nil then
        ngx.log(ngx.ERR, "ferryman: the client CA bundle of ", entry.key, " is not usable")
        return false
    end
    local connection = _M.ask(entry.key, cas.certs, policy.depth)
    if connection == nil then
        return false
    end
    if cas.crl then
        local verify_store = ffi.new("void *[1]")
        if C.SSL_ctrl(connection, SSL_CTRL_GET_VERIFY_CERT_STORE, 0, verify_store) ~= 1
            or verify_store[0] == nil
            or C.X509_STORE_add_crl(verify_store[0], cas.crl) ~= 1
            or C.X509_STORE_set_flags(verify_store[0], X509_V_FLAG_CRL_CHECKS) ~= 1 then
            C.ERR_clear_error()
            ngx.log(ngx.ERR, "ferryman: cannot use the CRL of ", entry.key)
            return false
        end
    end
    return true
end

-- NGINX's 400 for a missing or refused certificate, or, with ingress-nginx's
-- auth-tls-error-page (its error_page 495 496 = <url>), a 302 to that page.
local function refuse(policy, code)
    if policy.error_page then
        return ngx.redirect(policy.error_page, ngx.HTTP_MOVED_TEMPORARILY)
    end
    return ngx.exit(code)
end

-- Access phase of a request to entry's host (named host): nothing, or
-- NGINX's answers: 421 when the connection's SNI named another host (its
-- certificate was verified for that one, if at all), else the 400s.
function _M.check(store, entry, host)
    local policy = policy_of(store, entry)
    if not policy or policy.mode == "off" or ngx.var.https ~= "on" then
        return
    end
    if string.lower(ngx.var.ssl_server_name or "") ~= host then
        return ngx.exit(ngx.HTTP_MISDIRECTED_REQUEST or 421)
    end
    local verify = ngx.var.ssl_client_verify
    if verify == "SUCCESS" then
        return
    end
    if verify == "NONE" then
        if policy.mode == "on" then
            return refuse(policy, HTTPS_NO_CERT)
        end
        return
    end
    if policy.mode == "optional_no_ca" then
        local connection = C.ngx_http_lua_ffi_get_req_ssl_pointer(base.get_request())
        if connection ~= nil and NO_CA_ERRORS[tonumber(C.SSL_get_verify_result(connection))] then
            return
        end
    end
    ngx.log(ngx.INFO, "ferryman: client certificate refused: ", verify)
    return refuse(policy, HTTPS_CERT_ERROR)
end

return _M
