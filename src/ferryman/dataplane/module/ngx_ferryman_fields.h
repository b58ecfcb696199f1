/*
 * Reading the records ferryman pushes (configs/routes.py,
 * kinds/transport/records/stream.py): space-separated fields and "<addr>#<port>"
 * peers. Both modules read them (ngx_http_ferryman_module and, in its own
 * .so, ngx_stream_ferryman_module), so the readers are static inline here
 * rather than exported from one .so to the other.
 */

#ifndef _NGX_FERRYMAN_FIELDS_H_INCLUDED_
#define _NGX_FERRYMAN_FIELDS_H_INCLUDED_

#include <ngx_config.h>
#include <ngx_core.h>


/* The next field from *pos on (leading spaces skipped), *pos moved past it:
 * NGX_OK, or NGX_DONE at end. */
static ngx_inline ngx_int_t
ngx_ferryman_field(u_char **pos, u_char *end, ngx_str_t *field)
{
    u_char  *p;

    p = *pos;

    while (p < end && *p == ' ') {
        p++;
    }

    if (p == end) {
        return NGX_DONE;
    }

    field->data = p;

    while (p < end && *p != ' ') {
        p++;
    }

    field->len = p - field->data;
    *pos = p;

    return NGX_OK;
}


/* An upper bound of ngx_ferryman_field()'s results: one more than the
 * spaces. */
static ngx_inline ngx_uint_t
ngx_ferryman_count_fields(ngx_str_t *text)
{
    ngx_uint_t  i, n;

    n = 1;
    for (i = 0; i < text->len; i++) {
        if (text->data[i] == ' ') {
            n++;
        }
    }

    return n;
}


/* A peer "<addr>#<port>" (the IPv6 address unbracketed): its port, with
 * *hash at its last '#' (the address ends there); NGX_DECLINED when it has
 * no '#' or no port in 1..65535. */
static ngx_inline ngx_int_t
ngx_ferryman_peer_port(u_char *text, size_t len, u_char **hash)
{
    size_t     n;
    ngx_int_t  port;

    for (n = len; n > 0; n--) {
        if (text[n - 1] == '#') {
            *hash = text + n - 1;
            port = ngx_atoi(*hash + 1, text + len - *hash - 1);

            return (port < 1 || port > 65535) ? NGX_DECLINED : port;
        }
    }

    return NGX_DECLINED;
}


/* A peer field as an address in pool (port set), its name as NGINX writes
 * it ($upstream_addr) and the name's CRC: NGX_OK; NGX_DECLINED: not a peer
 * (skipped); NGX_ERROR: no memory. */
static ngx_inline ngx_int_t
ngx_ferryman_peer(ngx_pool_t *pool, ngx_str_t *field,
    struct sockaddr **sockaddr, socklen_t *socklen, ngx_str_t *name,
    uint32_t *hash)
{
    u_char      *sign;
    ngx_int_t    port;
    ngx_addr_t   addr;

    port = ngx_ferryman_peer_port(field->data, field->len, &sign);
    if (port == NGX_DECLINED) {
        return NGX_DECLINED;
    }

    if (ngx_parse_addr(pool, &addr, field->data, sign - field->data)
        != NGX_OK)
    {
        return NGX_DECLINED;
    }

    ngx_inet_set_port(addr.sockaddr, (in_port_t) port);

    name->data = ngx_pnalloc(pool, NGX_SOCKADDR_STRLEN);
    if (name->data == NULL) {
        return NGX_ERROR;
    }

    name->len = ngx_sock_ntop(addr.sockaddr, addr.socklen, name->data,
                              NGX_SOCKADDR_STRLEN, 1);
    *sockaddr = addr.sockaddr;
    *socklen = addr.socklen;
    *hash = ngx_crc32_short(name->data, name->len);

    return NGX_OK;
}


/* Paths ordered by length, then bytes: the order routes are sorted and
 * looked up in. */
static ngx_inline int
ngx_ferryman_path_cmp(const ngx_str_t *path, const u_char *data, size_t len)
{
    if (path->len != len) {
        return path->len < len ? -1 : 1;
    }

    return ngx_memcmp(path->data, data, len);
}


#endif /* _NGX_FERRYMAN_FIELDS_H_INCLUDED_ */
