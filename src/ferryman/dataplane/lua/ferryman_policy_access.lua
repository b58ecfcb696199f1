-- The accessControl Policy: NGINX's allow/deny on the client's address
-- ($remote_addr). P item: a|<allow|deny>|<network>,... with each network
-- <4|6>.<address, hex>.<prefix length> (kinds/policy/records/access.py).

local byte, sub, char = string.byte, string.sub, string.char
local band, lshift = bit.band, bit.lshift
local tonumber = tonumber

local _M = {}

local function network_of(text)
    local version, hex, prefix = string.match(text, "^(%d)%.(%x+)%.(%d+)$")
    local bytes = {}
    for i = 1, #hex, 2 do
        bytes[#bytes + 1] = char(tonumber(sub(hex, i, i + 1), 16))
    end
    return { len = version == "4" and 4 or 16, address = table.concat(bytes), prefix = tonumber(prefix) }
end

-- A networks field (kinds/policy/records/access.py's networks_field).
local function networks_of(text)
    local networks = {}
    for net in string.gmatch(text or "", "[^,]+") do
        networks[#networks + 1] = network_of(net)
    end
    return networks
end
_M.networks_of = networks_of

function _M.decode(f)
    return { allow = f[1] == "allow", networks = networks_of(f[2]) }
end

local function contains(net, addr)
    if #addr ~= net.len then
        return false
    end
    local bits = net.prefix
    local i = 1
    while bits >= 8 do
        if byte(addr, i) ~= byte(net.address, i) then
            return false
        end
        i = i + 1
        bits = bits - 8
    end
    if bits == 0 then
        return true
    end
    local mask = band(lshift(0xff, 8 - bits), 0xff)
    return band(byte(addr, i), mask) == byte(net.address, i)
end

-- NGINX's access module checks an IPv4-mapped IPv6 client against the IPv4 rules.
local MAPPED = string.rep("\0", 10) .. "\255\255"

local function client()
    local addr = ngx.var.binary_remote_addr or ""
    if #addr == 16 and sub(addr, 1, 12) == MAPPED then
        addr = sub(addr, 13)
    end
    return addr
end

-- Whether the client's address is in one of networks (NGINX's geo, as
-- ingress-nginx's limit allow list reads it).
function _M.client_in(networks)
    local addr = client()
    for _, net in ipairs(networks) do
        if contains(net, addr) then
            return true
        end
    end
    return false
end

function _M.check(config)
    local addr = client()
    for _, net in ipairs(config.networks) do
        if contains(net, addr) then
            return (not config.allow) and ngx.HTTP_FORBIDDEN or nil
        end
    end
    return config.allow and ngx.HTTP_FORBIDDEN or nil
end

return _M
