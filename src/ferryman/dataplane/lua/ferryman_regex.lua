-- The regular expressions a request is routed or limited by: routes' paths,
-- match conditions, rate-limit tiers. PCRE may fail to run one to its end (a
-- long subject exhausts its JIT stack or its match limit); that is neither a
-- match nor a miss, so the request ends here with 500, as NGINX ends it for a
-- location regex that fails (and as ngx_http_ferryman_vs.c does), rather than
-- fall through to a route, or skip a condition or a policy, it was not meant
-- for. Only from phases where ngx.exit ends the request (rewrite, access).

local re_find, re_match = ngx.re.find, ngx.re.match

local _M = {}

local function failed(what, pattern, err)
    ngx.log(ngx.ERR, "ferryman: ", what, " regex \"", pattern, "\" of host \"",
            ngx.var.host, "\" failed: ", err)
    return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
end

-- Whether ``pattern`` matches ``subject``; ``what`` names it in the log.
function _M.finds(what, subject, pattern, options)
    local from, _, err = re_find(subject, pattern, options)
    if from then
        return true
    end
    if err then
        return failed(what, pattern, err)
    end
    return false
end

-- ngx.re.match's captures, nil when it does not match.
function _M.match(what, subject, pattern, options)
    local m, err = re_match(subject, pattern, options)
    if m == nil and err then
        return failed(what, pattern, err)
    end
    return m
end

return _M
