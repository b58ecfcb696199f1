-- The slow path's response filters (header_filter_by_lua and
-- body_filter_by_lua on @ferryman, slow-path.conf.tmpl and
-- grpc-locations.conf.tmpl): a VirtualServer route's response changes and
-- error pages (ferryman_vs), the sticky cookie of the peer that answered
-- (ferryman_sticky), an Ingress host's hsts and server-tokens, and the
-- auth service's Set-Cookie (ferryman_policy_external). Its own
-- module because these run once the answer is coming and only read what
-- routing and the balancer left in ngx.ctx; ferryman.lua exports
-- header_filter and body_filter as they are.

local virtual_servers = require("ferryman_vs")
local sticky = require("ferryman_sticky")
local external_auth = require("ferryman_policy_external")

local _M = {}

-- An Ingress host's nginx.org/hsts (NIC's add_header ... always, with the
-- upstream's own header hidden; only over HTTPS, or with hsts-behind-proxy
-- when X-Forwarded-Proto is https) and nginx.org/server-tokens (NGINX's
-- server_tokens on: its version in the Server header).
local function ingress_options(options)
    local var = ngx.var
    -- $ferryman_hsts exists when the ConfigMap's hsts is on: its add_header
    -- (server level, after this filter) sends the header; never two.
    if options.hsts and var.ferryman_hsts == nil then
        local secure
        if options.hsts_behind_proxy then
            secure = var.http_x_forwarded_proto == "https"
        else
            secure = var.https == "on"
        end
        ngx.header["Strict-Transport-Security"] = secure and options.hsts or nil
    end
    if options.server_tokens then
        ngx.header["Server"] = "nginx/" .. var.nginx_version
    end
end

-- header_filter_by_lua of the slow path: a VirtualServer route's response
-- header changes (ferryman_vs), nothing for any other request.
function _M.header_filter()
    local ctx = ngx.ctx
    local response = ctx.ferryman_response
    if response then
        virtual_servers.header_filter(response)
    end
    local upstream = ctx.ferryman_host
    if upstream and upstream.sticky and ctx.ferryman_peer and ngx.var.upstream_status then
        sticky.header_filter(upstream.sticky, ctx.ferryman_peer)
    end
    local options = ctx.ferryman_options
    if options then
        ingress_options(options)
    end
    local auth_cookies = ctx.ferryman_auth_cookies
    if auth_cookies then
        external_auth.header_filter(auth_cookies)
    end
end

-- body_filter_by_lua of the slow path: a VirtualServer error page's body.
function _M.body_filter()
    local response = ngx.ctx.ferryman_response
    if response then
        virtual_servers.body_filter(response)
    end
end

return _M
