/*
 * accessControl Policies in C: the F record's <access> (the grammar:
 * ngx_http_ferryman_vs_parse.c), decoded once per record, and the check per
 * request, with the semantics of ferryman_policy_access.lua (the slow path)
 * and of NGINX's allow/deny, which NIC writes:
 *
 * - the client is the connection's address as the realip module leaves it
 *   ($binary_remote_addr: the PROXY protocol's on the TLS-passthrough
 *   socket);
 * - an IPv4-mapped IPv6 client is checked against the IPv4 networks;
 * - the first network holding the client decides (allow list: let through,
 *   deny list: 403); none: the list's "all" (allow list: 403, deny list:
 *   let through); a client of another family (a unix socket) holds none.
 *
 * The route's rate limits count the request first (limit_req runs in NGINX's
 * preaccess phase, allow/deny in the access phase; the Lua router's order
 * too): ngx_http_ferryman_route.c.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_vs_record.h"


/* The record: <4|6>.<network address, hex: 8 or 32 digits>.<prefix length>
 * (kinds/policy/records/access.py's networks, one token each). */

static ngx_int_t
ferryman_access_hex(u_char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }

    c = (u_char) (c | 0x20);

    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }

    return -1;
}


static ngx_int_t
ferryman_access_parse_net(ferryman_vs_parser_t *ps, ferryman_access_net_t *n)
{
    u_char      bytes[16], mask[16];
    ngx_int_t   hi, lo;
    ngx_uint_t  i, len, prefix;

    if (ps->end - ps->p < 2 || ps->p[1] != '.') {
        return NGX_ERROR;
    }

    switch (ps->p[0]) {
    case '4':
        len = 4;
        break;
    case '6':
        len = 16;
        break;
    default:
        return NGX_ERROR;
    }

    ps->p += 2;

    /* Exactly len bytes of hex, then ".". */
    if ((size_t) (ps->end - ps->p) < len * 2 + 1 || ps->p[len * 2] != '.') {
        return NGX_ERROR;
    }

    for (i = 0; i < len; i++) {
        hi = ferryman_access_hex(ps->p[2 * i]);
        lo = ferryman_access_hex(ps->p[2 * i + 1]);

        if (hi < 0 || lo < 0) {
            return NGX_ERROR;
        }

        bytes[i] = (u_char) (hi * 16 + lo);
    }

    ps->p += len * 2 + 1;

    if (ferryman_vs_digits(ps, len * 8, &prefix) != NGX_OK
        || ferryman_vs_end_token(ps) != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* The mask of the prefix; host bits of the address are dropped, as
     * NGINX drops them ("low address bits are meaningless"). */
    for (i = 0; i < len; i++) {
        if (prefix >= 8) {
            mask[i] = 0xff;
            prefix -= 8;

        } else {
            mask[i] = (u_char) (0xff << (8 - prefix));
            prefix = 0;
        }

        bytes[i] &= mask[i];
    }

    n->words = len / 4;
    ngx_memcpy(n->net, bytes, len);
    ngx_memcpy(n->mask, mask, len);

    return NGX_OK;
}


/* <allow 0|1> <n> <network>... */
ngx_int_t
ferryman_vs_parse_access(ferryman_vs_parser_t *ps, ferryman_access_t **out)
{
    ngx_uint_t          i, n, allow;
    ferryman_access_t  *a;

    if (ferryman_vs_flag(ps, &allow) != NGX_OK
        || ferryman_vs_count(ps, &n) != NGX_OK)
    {
        return NGX_ERROR;
    }

    a = ngx_pcalloc(ps->pool, sizeof(ferryman_access_t));
    if (a == NULL) {
        return NGX_ERROR;
    }

    if (n > 0) {
        a->nets = ngx_palloc(ps->pool, n * sizeof(ferryman_access_net_t));
        if (a->nets == NULL) {
            return NGX_ERROR;
        }
    }

    a->nnets = n;
    a->allow = allow;

    for (i = 0; i < n; i++) {
        if (ferryman_access_parse_net(ps, &a->nets[i]) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    *out = a;

    return NGX_OK;
}


/* Requests. */

ngx_int_t
ferryman_access_check(ngx_http_request_t *r, ferryman_access_t *a)
{
    uint32_t               addr[4];
    ngx_uint_t             i, j, words, held;
    struct sockaddr_in    *sin;
    ferryman_access_net_t *n;
#if (NGX_HAVE_INET6)
    u_char                *p;
    struct sockaddr_in6   *sin6;
#endif

    words = 0;

    switch (r->connection->sockaddr->sa_family) {

    case AF_INET:
        sin = (struct sockaddr_in *) r->connection->sockaddr;
        addr[0] = sin->sin_addr.s_addr;
        words = 1;
        break;

#if (NGX_HAVE_INET6)
    case AF_INET6:
        sin6 = (struct sockaddr_in6 *) r->connection->sockaddr;
        p = sin6->sin6_addr.s6_addr;

        if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
            ngx_memcpy(addr, p + 12, 4);
            words = 1;

        } else {
            ngx_memcpy(addr, p, 16);
            words = 4;
        }

        break;
#endif
    }

    held = 0;

    for (i = 0; words > 0 && i < a->nnets && !held; i++) {
        n = &a->nets[i];

        if (n->words != words) {
            continue;
        }

        for (j = 0; j < words; j++) {
            if ((addr[j] & n->mask[j]) != n->net[j]) {
                break;
            }
        }

        held = (j == words);
    }

    /* Held: the list's own action; else "all", the other one. */
    return (held == a->allow) ? NGX_OK : NGX_HTTP_FORBIDDEN;
}
