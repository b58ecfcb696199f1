/*
 * The Gateway server's routing (`ferryman_gateway_route @slow`): a Gateway
 * listener's HTTPRoute matches the module serves itself, from the X record
 * ferryman pushes beside each W record (kinds/gateway/records/servers.py),
 * keyed as W is: "X:<address>:<port>/<name>". Its value is an F record
 * (kinds/gateway/records/fast.py; ngx_http_ferryman_vs.c routes by it), or
 * "-" when the slow path serves that name's every request.
 *
 * The look-up is ferryman_gateway.lua's: the request's socket (its local
 * address and port, or the PROXY protocol's behind the stream block's hop of
 * NGINX 1.22, as ferryman.gateway_route() reads them), the address then "*";
 * at each, the name (lowercase, a DNS name's characters, at most 253 bytes;
 * else only "_"), then each wildcard covering it from the longest suffix,
 * then "_". The first X record found decides, a "-" one too, so the module
 * never takes a name past the W record Lua would route it by.
 *
 * What stays with the slow path (NGX_ERROR): HTTPS (gateway_route()'s 421
 * for a Host another listener serves than its SNI name's, client
 * certificates), a name without a record (Lua's 404), a location the record
 * leaves slow, and everything while an X record is missing for lack of
 * memory (gateway_gaps, until a full push), since a missing name would fall
 * through to a wider one's. A module without this file stores no X record
 * (ngx_http_ferryman_put ignores kinds it does not read) and the
 * configuration then has no ferryman_gateway_route (dataplane/main_file.py).
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman.h"


/* "<address>:<port>/" + "*." + a name of at most 253 bytes. */
#define FERRYMAN_GATEWAY_KEY  (NGX_SOCKADDR_STRLEN + sizeof(":65535/*.") + 256)


/* The X record at the socket prefix buf[0..prefix) for "name": the first of
 * name, its wildcards, "_" ("usable": the name may be looked up at all). */
static ferryman_host_t *
ferryman_gateway_at(ferryman_cache_t *cache, u_char *buf, size_t prefix,
    ngx_str_t *name, ngx_uint_t usable)
{
    u_char           *rest, *end, *dot;
    ngx_str_t         key;
    ferryman_host_t  *host;

    key.data = buf;

    if (usable) {
        key.len = ngx_cpymem(buf + prefix, name->data, name->len) - buf;

        host = ferryman_cached_host(cache, 'X', &key);
        if (host != NULL) {
            return host;
        }

        rest = name->data;
        end = name->data + name->len;

        for ( ;; ) {
            dot = ngx_strlchr(rest, end, '.');
            if (dot == NULL) {
                break;
            }

            rest = dot + 1;
            buf[prefix] = '*';
            buf[prefix + 1] = '.';
            key.len = ngx_cpymem(buf + prefix + 2, rest, end - rest) - buf;

            host = ferryman_cached_host(cache, 'X', &key);
            if (host != NULL) {
                return host;
            }
        }
    }

    buf[prefix] = '_';
    key.len = prefix + 1;

    return ferryman_cached_host(cache, 'X', &key);
}


/* The request's socket as ferryman.gateway_route() reads it: $server_addr
 * and $server_port, or $proxy_protocol_server_addr and _port when the
 * latter is set. NGX_DECLINED: none a W record can have (a unix socket). */
static ngx_int_t
ferryman_gateway_socket(ngx_http_request_t *r, ngx_str_t *addr,
    ngx_uint_t *port)
{
    ngx_connection_t  *c;

    c = r->connection;

    if (c->proxy_protocol != NULL && c->proxy_protocol->dst_port > 0) {
        *addr = c->proxy_protocol->dst_addr;
        *port = c->proxy_protocol->dst_port;
        return NGX_OK;
    }

    /* addr->data: NGX_SOCKADDR_STRLEN bytes, as $server_addr's. */
    if (ngx_connection_local_sockaddr(c, addr, 0) != NGX_OK) {
        return NGX_ERROR;
    }

    *port = ngx_inet_get_port(c->local_sockaddr);

    return (*port > 0 && *port < 65536) ? NGX_OK : NGX_DECLINED;
}


ngx_int_t
ferryman_gateway_route(ngx_http_request_t *r, ferryman_shctx_t *sh)
{
    size_t                     prefix;
    u_char                     buf[FERRYMAN_GATEWAY_KEY];
    u_char                     text[NGX_SOCKADDR_STRLEN];
    ngx_int_t                  rc;
    ngx_str_t                 *name, addr;
    ngx_uint_t                 port, usable, i;
    ferryman_host_t           *host;
    ferryman_cache_t          *cache;

#if (NGX_HTTP_SSL)
    if (r->connection->ssl != NULL) {
        return NGX_ERROR;
    }
#endif

    if (sh->gateway_gaps) {
        return NGX_ERROR;
    }

    addr.data = text;
    addr.len = sizeof(text);

    if (ferryman_gateway_socket(r, &addr, &port) != NGX_OK
        || addr.len > NGX_SOCKADDR_STRLEN)
    {
        return NGX_ERROR;
    }

    cache = ferryman_current_cache(sh);
    if (cache == NULL) {
        return NGX_ERROR;
    }

    name = ferryman_request_name(r);

    usable = ferryman_possible_host(name);
    host = NULL;

    for (i = 0; i < 2 && host == NULL; i++) {
        if (i == 0) {
            prefix = ngx_sprintf(buf, "%V:%ui/", &addr, port) - buf;

        } else {
            prefix = ngx_sprintf(buf, "*:%ui/", port) - buf;
        }

        host = ferryman_gateway_at(cache, buf, prefix, name, usable);
    }

    if (host == NULL || host->vs == NULL) {
        return NGX_ERROR;
    }

    rc = ferryman_route_host(r, cache, host, 1);

    /* A "no route" the module would answer itself: only a route's own rate
     * limits or access lists give one, which X records never hold. */
    return rc == NGX_HTTP_NOT_FOUND ? NGX_ERROR : rc;
}
