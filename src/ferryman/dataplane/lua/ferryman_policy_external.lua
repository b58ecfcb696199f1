-- The externalAuth Policy: NGINX's auth_request, asked per request
-- (kinds/policy/records/external.py says why this way). P item:
-- x|<backend key>|<authURI, base64>|<ssl 0|1>.
--
-- The subrequest goes to nginx.conf's internal location AUTH_LOCATION, whose
-- proxy_pass is $ferryman_auth_url ("http(s)://ferryman_backend<authURI>");
-- the balancer of ferryman_backend picks the peer from the ctx handed to the
-- subrequest, as for any VirtualServer upstream. ferryman.lua fills in
-- peers_for (the Service's endpoints) and release (the in-flight count of the
-- peer tried, which a subrequest's own log phase would never undo).

local decode_base64 = ngx.decode_base64
local capture = ngx.location.capture

local AUTH_LOCATION = "/_ferryman/external-auth"

local _M = {}

function _M.decode(f)
    local ssl = f[3] == "1"
    return {
        key = f[1],
        url = (ssl and "https" or "http") .. "://ferryman_backend" .. decode_base64(f[2]),
        -- The upstream settings the balancer reads: NIC's auth upstream has
        -- NGINX's defaults but ferryman's max_fails and fail_timeout.
        host = { key = f[1], max_fails = 1, fail_timeout = 10, tries = 0 },
    }
end

function _M.check(config)
    local peers = _M.peers_for(config.key)
    if #peers == 0 then
        -- auth_request: the subrequest's 502 (no live upstream) is a 500.
        return ngx.HTTP_INTERNAL_SERVER_ERROR
    end
    local ctx = { ferryman_peers = peers, ferryman_host = config.host }
    -- auth_request's subrequest: GET, the client's headers, no body.
    local res = capture(AUTH_LOCATION, {
        method = ngx.HTTP_GET,
        ctx = ctx,
        vars = { ferryman_auth_url = config.url },
    })
    _M.release(ctx)
    local status = res.status
    if status >= 200 and status < 300 then
        return nil
    end
    if status == ngx.HTTP_UNAUTHORIZED then
        local challenge = res.header["WWW-Authenticate"]
        if challenge then
            ngx.header["WWW-Authenticate"] = challenge
        end
        return status
    end
    if status == ngx.HTTP_FORBIDDEN then
        return status
    end
    return ngx.HTTP_INTERNAL_SERVER_ERROR
end

return _M
