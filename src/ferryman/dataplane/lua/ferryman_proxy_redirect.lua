-- nginx.org/proxy-redirect-from and -to on an Ingress: NGINX's proxy_redirect,
-- applied in the header filter to the upstream's Location and Refresh headers
-- (ferryman.kinds.ingress.records.as_virtualserver writes it as the action's tenth field,
-- "<mode>~<redirect>~<replacement>" in base64), so no Ingress needs a
-- location (and a reload) of its own.
--
-- As NGINX (ngx_http_proxy_rewrite_*_handler): mode "p" replaces the
-- redirect when the value starts with it (case-sensitively) and keeps the
-- rest; "r" ("~") and "i" ("~*", caseless) replace the whole value with the
-- replacement when the regular expression matches, $1..$9 being its
-- captures. Both the redirect and the replacement may hold NGINX variables
-- ($name, ${name}). For Refresh, the part after "url=" is rewritten.

local decode_base64 = ngx.decode_base64
local find, sub, lower, byte = string.find, string.sub, string.lower, string.byte
local concat = table.concat

local BRACE = byte("{")

local _M = {}

-- "<mode>~<redirect>~<replacement>" as a rule; nil when empty.
function _M.decode(text)
    if text == nil or text == "" then
        return nil
    end
    local first = find(text, "~", 1, true)
    local second = first and find(text, "~", first + 1, true)
    if not second then
        return nil
    end
    local mode = sub(text, 1, first - 1)
    local rule = {
        from = decode_base64(sub(text, first + 1, second - 1)),
        to = decode_base64(sub(text, second + 1)),
    }
    if mode == "r" then
        rule.options = "jo"
    elseif mode == "i" then
        rule.options = "ijo"
    end
    return rule
end

-- NGINX's complex value: $name and ${name} variables, $1..$9 captures (one digit).
local function complex(text, captures)
    if not find(text, "$", 1, true) then
        return text
    end
    local parts, i, n = {}, 1, #text
    while i <= n do
        local at = find(text, "$", i, true)
        if at == nil then
            parts[#parts + 1] = sub(text, i)
            break
        end
        parts[#parts + 1] = sub(text, i, at - 1)
        local next_byte = byte(text, at + 1)
        local name, after
        if next_byte == BRACE then
            local close = find(text, "}", at + 2, true)
            if close then
                name, after = sub(text, at + 2, close - 1), close + 1
            end
        elseif next_byte == nil or next_byte < 49 or next_byte > 57 then
            local s, e = find(text, "^[%w_]+", at + 1)
            if s then
                name, after = sub(text, s, e), e + 1
            end
        end
        if next_byte and next_byte >= 49 and next_byte <= 57 then -- $1..$9
            parts[#parts + 1] = captures and captures[next_byte - 48] or ""
            i = at + 2
        elseif name and name ~= "" then
            parts[#parts + 1] = ngx.var[name] or ""
            i = after
        else
            parts[#parts + 1] = "$"
            i = at + 1
        end
    end
    return concat(parts)
end

local function rewritten(value, rule)
    if rule.options then
        local m, err = ngx.re.match(value, rule.from, rule.options)
        if err then
            ngx.log(ngx.ERR, "ferryman: proxy-redirect-from: ", err)
        end
        if not m then
            return nil
        end
        return complex(rule.to, m)
    end
    local from = complex(rule.from)
    if sub(value, 1, #from) ~= from then
        return nil
    end
    return complex(rule.to) .. sub(value, #from + 1)
end

-- In the header filter, for an answer of the upstream.
function _M.header_filter(rule)
    local location = ngx.header["Location"]
    if type(location) == "string" then
        local new = rewritten(location, rule)
        if new then
            ngx.header["Location"] = new
        end
    end
    local refresh = ngx.header["Refresh"]
    if type(refresh) == "string" then
        local at = find(lower(refresh), "url=", 1, true)
        local new = at and rewritten(sub(refresh, at + 4), rule)
        if new then
            ngx.header["Refresh"] = sub(refresh, 1, at + 3) .. new
        end
    end
end

return _M
