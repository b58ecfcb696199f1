-- ingress-nginx's custom-http-errors with its default-backend annotation: a
-- listed code of a route's response, the upstream's or NGINX's own (a 502 when
-- no peer answers), is answered by the default-backend Service, told what
-- happened as ingress-nginx tells its error backends.
--
-- NGINX's error_page takes no variable, so the slow path's locations have
-- none (and proxy_intercept_errors on, which then intercepts nothing); the
-- access phase hands the request and its codes to ngx_http_ferryman_module
-- (ngx_http_ferryman_errors.c), which gives that one request error pages for
-- them: each code an internal redirect to /_ferryman/custom-error/<code>
-- (nginx.conf.tmpl), whose access phase is serve() here. A new set of codes is
-- a push, never a reload.
--
-- What follows the request there: NGINX variables ($ferryman_backend, the
-- route's; $ferryman_error_backend, $ferryman_error_ingress), not ngx.ctx,
-- which an internal redirect drops; so the balancer names the intercepted
-- attempt's in-flight count in $ferryman_counted for serve() to end.

local ffi = require("ffi")
local base = require("resty.core.base")

local counters = ngx.shared.ferryman_balancer
local match = string.match

local _M = {}

local native = nil
do
    pcall(ffi.cdef, [[
        int ngx_http_ferryman_error_pages(void *r, const char *codes, size_t len);
    ]])
    if pcall(function()
        return ffi.C.ngx_http_ferryman_error_pages
    end) then
        native = ffi.C
    end
end

-- The default backend's balancing: round-robin, NGINX's passive health
-- defaults (ferryman_balancer reads these fields of a host).
local ERROR_BACKEND = { max_fails = 1, fail_timeout = 10 }

-- The access phase of a route whose upstream has error codes, once it is
-- about to be proxied (ferryman.lua's proxy_to).
function _M.intercept(upstream)
    if native == nil then
        ngx.log(ngx.ERR, "ferryman: custom-http-errors need ngx_http_ferryman_module")
        return
    end
    local codes = upstream.error_codes
    if native.ngx_http_ferryman_error_pages(base.get_request(), codes, #codes) ~= 0 then
        ngx.log(ngx.ERR, "ferryman: custom-http-errors ", codes, " not applied")
        return
    end
    local var = ngx.var
    var.ferryman_error_backend = upstream.fallback
    var.ferryman_error_ingress = upstream.error_ingress
    ngx.ctx.ferryman_error_pages = true
end

-- The access phase of /_ferryman/custom-error/<code>: the default backend's
-- peers for the balancer, and ingress-nginx's headers (X-Code ...) as the
-- location sends them. No peer: the code with NGINX's own page (its error
-- pages are used up: r->error_page).
function _M.serve(peers_for)
    local var = ngx.var
    local counted = var.ferryman_counted
    if counted ~= nil and counted ~= "" then
        counters:incr(counted, -1, 0)
        var.ferryman_counted = ""
    end
    local code = match(var.uri, "^/_ferryman/custom%-error/(%d%d%d)$")
    local backend = var.ferryman_error_backend
    if code == nil or backend == nil or backend == "" then
        return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
    end
    -- The route's backend key: <namespace>/<service>:<port>.
    local namespace, service, port = match(var.ferryman_backend or "", "^([^/]*)/([^:]*):(.*)$")
    var.ferryman_error_code = code
    var.ferryman_error_namespace = namespace or ""
    var.ferryman_error_service = service or ""
    var.ferryman_error_port = port or ""
    local id = var.http_x_request_id
    var.ferryman_error_request_id = (id and id ~= "") and id or var.request_id
    local peers = peers_for(backend)
    if #peers == 0 then
        return ngx.exit(tonumber(code))
    end
    var.ferryman_backend = backend
    var.ferryman_egress_verify = "" -- the route's TLS settings are not the default backend's
    local ctx = ngx.ctx
    ctx.ferryman_peers = peers
    ctx.ferryman_host = ERROR_BACKEND
    ngx.req.set_uri("/")
end

return _M
