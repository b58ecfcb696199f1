-- NGINX variables as NIC's policies read them (rate-limit keys and
-- conditions): ngx.var, and the variables NIC's own configuration defines,
-- which a policy kind supplies here (apikey_client_name: the API key
-- policy's client; a prefix such as "jwt_claim_" takes the rest of the name).

local sub = string.sub

local _M = { named = {}, prefixed = {} }

-- A JWT claim (a rate-limit condition's "jwt:<claim>"): supplied by the jwt
-- policy's module when it is there; until then no claim, so only a default
-- tier applies (the VirtualServer's Warning says so).
_M.prefixed["jwt:"] = function()
    return ""
end

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

-- A text with ${name}s (NIC's syntax) as a template: literal parts and variable names,
-- alternating (literals at odd indexes), so each request only concatenates.
function _M.template(text)
    local parts, start = {}, 1
    while true do
        local from, to, name = string.find(text, "%${([%w_]+)}", start)
        if from == nil then
            parts[#parts + 1] = sub(text, start)
            return parts
        end
        parts[#parts + 1] = sub(text, start, from - 1)
        parts[#parts + 1] = name
        start = to + 1
    end
end

local buffer = {}

function _M.render(parts, set)
    local n = #parts
    if n == 1 then
        return parts[1]
    end
    for i = 1, n do
        buffer[i] = i % 2 == 1 and parts[i] or _M.value(parts[i], set)
    end
    return table.concat(buffer, "", 1, n)
end

return _M
