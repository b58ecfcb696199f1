-- An Ingress host with Policies (nginx.org/policies): its routes and policy
-- configurations come from a V record starting with "I", which
-- ferryman.kinds.ingress.records.policies documents and writes; its H record is a
-- stub, so every request of the host reaches the slow path, where ferryman.lua
-- matches the routes decoded here and enforce() applies the policies.

local policies = require("ferryman_policy")

local _M = {}

local EMPTY = {}

-- The host's routing as ferryman.lua's match() reads a host entry, plus the
-- policy sets: ``matched`` for a request a path (or the defaultBackend) takes,
-- ``unmatched`` for one answered 404.
function _M.decode(raw)
    local fields = policies.cut(raw, " ")
    local routing = {
        exact = {},
        prefix = {},
        default = fields[4] ~= "-" and fields[4] or nil,
    }
    local items = {}
    for i = 5, #fields do
        local f = policies.cut(fields[i], "|")
        if f[1] == "E" then
            routing.exact[f[2]] = f[3]
        elseif f[1] == "L" then
            routing.prefix[f[2]] = f[3]
        elseif f[1] == "P" then
            items[#items + 1] = policies.decode(f)
        end
    end
    routing.matched = policies.set_of(fields[2] ~= "-" and fields[2] or nil, items)
    routing.unmatched = policies.set_of(fields[3] ~= "-" and fields[3] or nil, items)
    return routing
end

-- NIC's server-level "return 500" (a missing, invalid or unsupported Policy),
-- which NGINX runs before anything else of the server.
function _M.failed(routing)
    local set = routing.matched
    return set ~= nil and set.error == true
end

-- Enforce the policies for a request that ``backend`` (nil: none) serves;
-- answers with ngx.exit when one refuses.
function _M.enforce(routing, backend)
    local set = backend and routing.matched or routing.unmatched
    if set == nil then
        return
    end
    local response = nil
    if set.c then
        -- ferryman.lua's header filter adds the CORS headers.
        response = { add = EMPTY, hide = EMPTY }
        ngx.ctx.ferryman_response = response
    end
    policies.enforce(set, response)
end

return _M
