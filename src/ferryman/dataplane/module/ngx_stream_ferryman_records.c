/*
 * A stream listener's records in the zone: a host's (TLS passthrough's S,
 * the certificates' T), "<kind>:<listener>/<host>", else its wildcard's
 * ("*.<parent>" in the host's place; a Gateway's listener tries every
 * parent, the longest first), and the listener's own,
 * "<kind>:<listener>".
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_stream.h>

#include "ngx_stream_ferryman.h"
#include "ngx_ferryman_stream_api.h"


/* For a wildcard host: the key of "a.b.c" becomes the key of "*.b.c", and
 * that of "*.b.c" the key of "*.c", in place ("*" takes the first label's
 * place: never longer), so that a name tries every wildcard that covers it,
 * the longest suffix first (as NGINX's map with hostnames and the Gateway
 * API's listener hostnames match); NGX_DECLINED when no dot follows the
 * first label. */
static ngx_int_t
ferryman_stream_wildcard(ngx_stream_ferryman_srv_conf_t *conf, ngx_str_t *key)
{
    u_char  *name, *label, *dot, *end;

    name = key->data + 2 + conf->listener.len + 1;
    end = key->data + key->len;
    /* A wildcard's first label is "*": its suffix starts after "*.". */
    label = (end - name > 2 && name[0] == '*' && name[1] == '.') ? name + 2
                                                                 : name;
    dot = ngx_strlchr(label, end, '.');

    if (dot == NULL || dot == label || dot + 1 == end) {
        return NGX_DECLINED;
    }

    name[0] = '*';
    ngx_memmove(name + 1, dot, end - dot);
    key->len = (name + 1 + (end - dot)) - key->data;

    return NGX_OK;
}


ngx_int_t
ferryman_stream_host_record(ngx_stream_ferryman_srv_conf_t *conf,
    ngx_pool_t *pool, u_char kind, u_char *name, size_t len, u_char *buf,
    ngx_str_t *key, ngx_str_t *value)
{
    u_char    *p;
    uint32_t   unused;

    value->len = 0;

    if (len == 0 || 2 + conf->listener.len + 1 + len > FERRYMAN_STREAM_MAX_KEY)
    {
        return NGX_OK;
    }

    p = buf;
    *p++ = kind;
    *p++ = ':';
    p = ngx_cpymem(p, conf->listener.data, conf->listener.len);
    *p++ = '/';
    /* Host names are matched lowercase, as ferryman writes them. */
    ngx_strlow(p, name, len);
    key->data = buf;
    key->len = p + len - buf;

    if (ngx_ferryman_stream_record(key, pool, value, &unused) == NGX_ERROR) {
        return NGX_ERROR;
    }

    while (value->len == 0 && ferryman_stream_wildcard(conf, key) == NGX_OK) {
        if (ngx_ferryman_stream_record(key, pool, value, &unused) == NGX_ERROR) {
            return NGX_ERROR;
        }

        if (!conf->suffixes) {
            break;  /* a TransportServer's wildcard: one label, as NIC's */
        }
    }

    return NGX_OK;
}


ngx_int_t
ferryman_stream_listener_record(ngx_stream_ferryman_srv_conf_t *conf,
    ngx_pool_t *pool, u_char kind, u_char *buf, ngx_str_t *key,
    ngx_str_t *value)
{
    uint32_t  unused;

    value->len = 0;

    if (2 + conf->listener.len > FERRYMAN_STREAM_MAX_KEY) {
        return NGX_OK;
    }

    buf[0] = kind;
    buf[1] = ':';
    key->data = buf;
    key->len = ngx_cpymem(buf + 2, conf->listener.data, conf->listener.len)
               - buf;

    if (ngx_ferryman_stream_record(key, pool, value, &unused) == NGX_ERROR) {
        return NGX_ERROR;
    }

    return NGX_OK;
}
