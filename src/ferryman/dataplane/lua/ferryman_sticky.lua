-- nginx.org/sticky-cookie-services on an Ingress and a VirtualServer upstream's
-- sessionCookie: NGINX's "sticky cookie" (1.29.6, NGINX Plus before), per request
-- in the slow path's balancer, from the U item's twelfth field
-- (ferryman.configs.sticky_field):
--
--   <name b64>~<expires s, -1 none, -2 max>~<domain b64>~<path b64>~<samesite b64>~<flags h/s/c>
--
-- (c: ingress-nginx's session-cookie-conditional-samesite-none.)
--
-- As NGINX: the cookie's value names a peer (the MD5 of its "address:port",
-- NGINX's default); a request whose cookie names a peer that is there, not
-- down and not tried goes to it; any other is balanced as usual, and the
-- answer sets the cookie to the peer that served it.

local decode_base64 = ngx.decode_base64
local find, sub = string.find, string.sub
local md5 = ngx.md5
local re_find, re_match = ngx.re.find, ngx.re.match

local _M = {}

-- NGINX's expires=max: a date in 2037 and ten years of max-age.
local MAX_EXPIRES, MAX_AGE = "Thu, 31-Dec-37 23:55:55 GMT", 315360000

function _M.decode(text, upstream)
    if text == nil or text == "" then
        return
    end
    local f, start = {}, 1
    while true do
        local at = find(text, "~", start, true)
        f[#f + 1] = sub(text, start, at and at - 1 or nil)
        if at == nil then
            break
        end
        start = at + 1
    end
    upstream.sticky = {
        name = decode_base64(f[1]),
        expires = tonumber(f[2]) or -1,
        domain = decode_base64(f[3] or ""),
        path = decode_base64(f[4] or ""),
        samesite = decode_base64(f[5] or ""),
        httponly = find(f[6] or "", "h", 1, true) ~= nil,
        secure = find(f[6] or "", "s", 1, true) ~= nil,
        none_conditional = find(f[6] or "", "c", 1, true) ~= nil,
    }
end

-- The clients Chromium's "SameSite=None: known incompatible clients" names:
-- iOS 12 and macOS 10.14's Safari and web views read SameSite=None as
-- Strict; Chrome/Chromium 51-66 and UC Browser before 12.13.2 reject the
-- cookie. A cookie for them goes without the attribute (Lax by default there).
local function none_unsafe(agent)
    if agent == nil then
        return false
    end
    if re_find(agent, [[\(iP.+; CPU .*OS 12[_\d]*.*\) AppleWebKit/]], "jo") then
        return true
    end
    if re_find(agent, [[\(Macintosh;.*Mac OS X 10_14[_\d]*.*\) AppleWebKit/]], "jo") then
        local safari = re_find(agent, [[Version/.* Safari/]], "jo")
            and not re_find(agent, [[Chrom(e|ium)]], "jo")
        local webview = re_find(agent,
            [[^Mozilla/[.\d]+ \(Macintosh;.*Mac OS X [_\d]+\) AppleWebKit/[.\d]+ \(KHTML, like Gecko\)$]],
            "jo")
        if safari or webview then
            return true
        end
    end
    if re_find(agent, [[Chrom(e|ium)/(5[1-9]|6[0-6])\.]], "jo") then
        return true
    end
    local uc = re_match(agent, [[UCBrowser/(\d+)\.(\d+)\.(\d+)]], "jo")
    if uc then
        local major, minor, build = tonumber(uc[1]), tonumber(uc[2]), tonumber(uc[3])
        if major ~= 12 then
            return major < 12
        end
        if minor ~= 13 then
            return minor < 13
        end
        return build < 2
    end
    return false
end

local function id_of(peer)
    return md5(peer[6])
end

-- The first attempt's peer the cookie names; nil: balance as usual.
function _M.peer(peers, cookie, avoid, is_down)
    local value = ngx.var["cookie_" .. cookie.name]
    if value == nil or value == "" then
        return nil
    end
    for i = 1, #peers do
        local peer = peers[i]
        if id_of(peer) == value then
            if avoid[peer[3]] or is_down(peer) then
                return nil
            end
            return peer
        end
    end
    return nil
end

-- In the header filter: the cookie naming the peer that answered, unless the
-- request's already did.
function _M.header_filter(cookie, peer)
    local id = id_of(peer)
    if ngx.var["cookie_" .. cookie.name] == id then
        return
    end
    local parts = { cookie.name .. "=" .. id }
    if cookie.expires == -2 then
        parts[#parts + 1] = "expires=" .. MAX_EXPIRES
        parts[#parts + 1] = "max-age=" .. MAX_AGE
    elseif cookie.expires >= 0 then
        parts[#parts + 1] = "expires=" .. ngx.cookie_time(ngx.time() + cookie.expires)
        parts[#parts + 1] = "max-age=" .. cookie.expires
    end
    if cookie.domain ~= "" then
        parts[#parts + 1] = "domain=" .. cookie.domain
    end
    if cookie.httponly then
        parts[#parts + 1] = "httponly"
    end
    if cookie.samesite ~= "" and not (cookie.samesite == "none" and cookie.none_conditional
            and none_unsafe(ngx.var.http_user_agent)) then
        parts[#parts + 1] = "samesite=" .. cookie.samesite
    end
    if cookie.secure then
        parts[#parts + 1] = "secure"
    end
    if cookie.path ~= "" then
        parts[#parts + 1] = "path=" .. cookie.path
    end
    local set = table.concat(parts, "; ")
    local had = ngx.header["Set-Cookie"]
    if had == nil then
        ngx.header["Set-Cookie"] = set
    else
        local values = type(had) == "table" and had or { had }
        values[#values + 1] = set
        ngx.header["Set-Cookie"] = values
    end
end

return _M
