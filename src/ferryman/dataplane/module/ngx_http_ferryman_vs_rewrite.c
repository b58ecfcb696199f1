/*
 * An Ingress route's rewrite in C (ingress-nginx's and nginx.org's
 * rewrite-target, kinds/ingress/records/as_virtualserver.py), the same as
 * ferryman_vs.lua's rewrite() makes it on the slow path, so such a route
 * stays on the fast path:
 *
 *   w <uri:str>      the URI becomes <uri> (a plain path: its pattern takes
 *                    every URI the location takes, and has no groups)
 *   r <target:str>   the location's own regex matched against the URI again
 *                    with its groups: "$<digit>" in <target> is that group
 *                    (empty when unset or absent), as "rewrite ... break"
 *
 * The new URI is set as ngx.req.set_uri(uri, false) sets it: proxy_pass then
 * sends it escaped, with the request's arguments. What set_uri refuses (an
 * empty URI, control bytes) answers 500, as the Lua error does.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_vs_record.h"


/* "$0".."$9": the whole match and nine groups, as Lua's "%$(%d)". */
#define FERRYMAN_REWRITE_GROUPS  10


ngx_int_t
ferryman_vs_parse_rewrite(ferryman_vs_parser_t *ps,
    ferryman_vs_location_t *loc, u_char kind)
{
    ferryman_vs_rewrite_t  *rw;

    rw = ngx_pcalloc(ps->pool, sizeof(ferryman_vs_rewrite_t));
    if (rw == NULL
        || ferryman_vs_string(ps, &rw->target) != NGX_OK
        || rw->target.len == 0)
    {
        return NGX_ERROR;
    }

    if (kind == 'r') {
        /* Groups exist only where the location is a regex. */
        if (loc->regex == NULL) {
            return NGX_ERROR;
        }

        rw->regex = loc->regex;
        rw->path = loc->path;

    } else if (kind != 'w') {
        return NGX_ERROR;
    }

    loc->rewrite = rw;

    return NGX_OK;
}


/* lua-nginx-module's unsafe URI bytes: %00-%08, %0A-%1F, %7F. */
static ngx_uint_t
ferryman_vs_unsafe(u_char *p, size_t len)
{
    u_char  c;

    while (len--) {
        c = *p++;

        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            return 1;
        }
    }

    return 0;
}


static ngx_int_t
ferryman_vs_expand(ngx_http_request_t *r, ferryman_vs_rewrite_t *rw,
    ngx_str_t *uri)
{
    int         captures[FERRYMAN_REWRITE_GROUPS * 3];
    u_char     *p, *t, *end;
    size_t      len;
    ngx_int_t   rc;
    ngx_uint_t  d, groups;

    rc = ngx_regex_exec(rw->regex, &r->uri, captures,
                        FERRYMAN_REWRITE_GROUPS * 3);

    if (rc == NGX_REGEX_NO_MATCHED) {
        /* ferryman_vs.lua leaves the URI as it is. */
        return NGX_DECLINED;
    }

    if (rc < 0) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "ferryman: rewrite regex \"%V\" of host \"%V\" "
                      "failed: %i", &rw->path, &r->headers_in.server, rc);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* 0: more groups than the vector holds, which is then full. */
    groups = (rc == 0) ? FERRYMAN_REWRITE_GROUPS : (ngx_uint_t) rc;
    end = rw->target.data + rw->target.len;

    for (len = 0, t = rw->target.data; t < end; t++) {
        if (*t == '$' && t + 1 < end && t[1] >= '0' && t[1] <= '9') {
            d = t[1] - '0';
            t++;

            if (d < groups && captures[2 * d] >= 0) {
                len += captures[2 * d + 1] - captures[2 * d];
            }

            continue;
        }

        len++;
    }

    p = ngx_pnalloc(r->pool, len ? len : 1);
    if (p == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    uri->data = p;
    uri->len = len;

    for (t = rw->target.data; t < end; t++) {
        if (*t == '$' && t + 1 < end && t[1] >= '0' && t[1] <= '9') {
            d = t[1] - '0';
            t++;

            if (d < groups && captures[2 * d] >= 0) {
                p = ngx_cpymem(p, r->uri.data + captures[2 * d],
                               captures[2 * d + 1] - captures[2 * d]);
            }

            continue;
        }

        *p++ = *t;
    }

    return NGX_OK;
}


ngx_int_t
ferryman_vs_rewrite(ngx_http_request_t *r, ferryman_vs_rewrite_t *rw)
{
    ngx_int_t  rc;
    ngx_str_t  uri;

    if (rw->regex == NULL) {
        uri.len = rw->target.len;
        /* The request's own copy: the record's memory is the worker
         * cache's. */
        uri.data = ngx_pstrdup(r->pool, &rw->target);
        if (uri.data == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

    } else {
        rc = ferryman_vs_expand(r, rw, &uri);

        if (rc != NGX_OK) {
            return rc == NGX_DECLINED ? NGX_OK : rc;
        }
    }

    if (uri.len == 0 || ferryman_vs_unsafe(uri.data, uri.len)) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "ferryman: rewrite of host \"%V\" made an empty or "
                      "unsafe URI", &r->headers_in.server);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    r->uri = uri;
    r->internal = 1;
    r->valid_unparsed_uri = 0;
    ngx_http_set_exten(r);
    r->valid_location = 0;
    r->uri_changed = 0;

    return NGX_OK;
}
