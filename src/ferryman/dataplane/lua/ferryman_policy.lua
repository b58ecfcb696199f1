-- NIC's Policies on VirtualServer routes (k8s.nginx.org/v1 Policy), per
-- request. ferryman.kinds.policy.records.attach decides which configurations apply
-- where (NIC's spec/route precedence) and writes each as a P item of the V
-- record; ferryman_vs.lua decodes the record with decode() and set_of() and
-- calls enforce() once the route is chosen.
--
-- Each kind is a module (ferryman_policy_<kind>.lua) returning
--   decode(fields) -> config     (fields: the P item's, after the letter)
--   check(config, set) -> status (answer it) or nil (pass)
-- and is enforced in NGINX's order for the directives NIC writes: the CORS
-- preflight first (a `return` in the rewrite phase), then limit_req and
-- limit_conn (preaccess, in NGINX's order), then allow/deny, auth_basic and
-- auth_request (access phase).

local find, sub = string.find, string.sub

local KINDS = {
    c = require("ferryman_policy_cors"),
    r = require("ferryman_policy_rate"),
    n = require("ferryman_policy_conn"),
    a = require("ferryman_policy_access"),
    b = require("ferryman_policy_basic"),
    j = require("ferryman_jwt"),
    k = require("ferryman_policy_apikey"),
    e = require("ferryman_egress"),
    x = require("ferryman_policy_external"),
}
-- (m, ingressMTLS, is enforced from the host's M record: ferryman_mtls.lua.)
-- (e, egressMTLS, refuses nothing: it sets the upstream handshake's variables.)
local ORDER = { "r", "n", "a", "b", "j", "k", "x", "e" }

local _M = {}

local function cut(text, sep)
    local out, start = {}, 1
    while true do
        local at = find(text, sep, start, true)
        if at == nil then
            out[#out + 1] = sub(text, start)
            return out
        end
        out[#out + 1] = sub(text, start, at - 1)
        start = at + 1
    end
end
_M.cut = cut

-- A P item's fields (f[1] "P", f[2] the letter) as the kind's configuration;
-- a letter this version does not know is kept and never enforced.
function _M.decode(f)
    local kind = KINDS[f[2]]
    local config = {}
    if kind then
        local fields = {}
        for i = 3, #f do
            fields[#fields + 1] = f[i]
        end
        config = kind.decode(fields)
    end
    config.letter = f[2]
    return config
end

-- A route's (or the S item's) field: the configurations by letter, or
-- { error = true } for "!" (answer 500); nil when it has none.
function _M.set_of(text, items)
    if text == nil or text == "" then
        return nil
    end
    if text == "!" then
        return { error = true }
    end
    local set = {}
    for _, n in ipairs(cut(text, ",")) do
        local config = items[tonumber(n)]
        if config then
            set[config.letter] = config
        end
    end
    return set
end

-- Enforce a route's set (answers with ngx.exit when a policy refuses).
-- ``response``: the table the header filter reads for this request, if any:
-- the CORS headers go there.
function _M.enforce(set, response)
    if set.error then
        return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
    end
    local cors = set.c
    if cors then
        KINDS.c.apply(cors, response)
    end
    for _, letter in ipairs(ORDER) do
        local config = set[letter]
        if config and KINDS[letter] then
            local code = KINDS[letter].check(config, set)
            if code then
                return ngx.exit(code)
            end
        end
    end
end

return _M
