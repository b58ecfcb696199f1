-- NGINX variables as NIC's policies read them (rate-limit keys and
-- conditions): ngx.var, and the variables NIC's own configuration defines,
-- which a policy kind supplies here (apikey_client_name: the API key
-- policy's client; a prefix such as "jwt_claim_" takes the rest of the name).

local gsub, sub = string.gsub, string.sub

local _M = { named = {}, prefixed = {} }

-- ``set``: the configurations the request's route enforces (by letter).
function _M.value(name, set)
    local special = _M.named[name]
    if special then
        return special(set) or ""
    end
    for prefix, get in pairs(_M.prefixed) do
        if sub(name, 1, #prefix) == prefix then
            return get(sub(name, #prefix + 1), set) or ""
        end
    end
    return ngx.var[name] or ""
end

-- ${name} (NIC's syntax) replaced by each variable's value.
function _M.expand(text, set)
    return (gsub(text, "%${([%w_]+)}", function(name)
        return _M.value(name, set)
    end))
end

return _M
