/*
 * An Ingress virtual host's record, "<tls> <redirect> <default> <balancing>
 * <route> ..." (configs/routes.py), decoded, and what requests ask of it:
 * the route of a path (Kubernetes' Exact and Prefix rules) and whether the
 * listener a request came in on serves the host.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman.h"
#include "ngx_ferryman_fields.h"


/* "<rr|lc>:<max_fails>:<fail_timeout seconds>"; anything else keeps the
 * defaults (round-robin, 1, 10 s), as ferryman.lua does. */
static void
ferryman_parse_balancing(ferryman_host_t *host, ngx_str_t *field)
{
    u_char     *p, *end, *colon;
    ngx_int_t   max_fails, timeout;

    host->balance.least_conn = 0;
    host->balance.max_fails = 1;
    host->balance.fail_timeout = 10000;

    p = field->data;
    end = p + field->len;

    colon = ngx_strlchr(p, end, ':');
    if (colon == NULL || colon == p) {
        return;
    }

    p = colon + 1;
    colon = ngx_strlchr(p, end, ':');
    if (colon == NULL) {
        return;
    }

    max_fails = ngx_atoi(p, colon - p);
    timeout = ngx_atofp(colon + 1, end - colon - 1, 3);
    if (max_fails == NGX_ERROR || timeout == NGX_ERROR) {
        return;
    }

    host->balance.least_conn = (field->data[0] == 'l' && field->data[1] == 'c');
    host->balance.max_fails = max_fails;
    host->balance.fail_timeout = timeout;
}


/* "E|<path>|<backend>" or "P|<path>|<backend>". */
static ngx_int_t
ferryman_parse_route(ngx_str_t *field, ferryman_route_t *route)
{
    u_char  *p, *end, *bar;

    if (field->len < 5 || field->data[1] != '|') {
        return NGX_DECLINED;
    }

    p = field->data + 2;
    end = field->data + field->len;

    bar = ngx_strlchr(p, end, '|');
    if (bar == NULL || bar == p || bar + 1 == end) {
        return NGX_DECLINED;
    }

    route->path.data = p;
    route->path.len = bar - p;
    route->backend.data = bar + 1;
    route->backend.len = end - bar - 1;

    return NGX_OK;
}


/* Routes ordered by path length, then bytes; equal paths keep the record's
 * order (each path's data lies in the record, in order), so the first one
 * wins as in ferryman.lua and configs/routes.py. */
static int ngx_libc_cdecl
ferryman_route_cmp(const void *one, const void *two)
{
    const ferryman_route_t  *a = one, *b = two;

    int  rc;

    rc = ngx_ferryman_path_cmp(&a->path, b->path.data, b->path.len);
    if (rc != 0) {
        return rc;
    }

    return (a->path.data > b->path.data) - (a->path.data < b->path.data);
}


/* The first route (in record order) whose path is data[0..len). */
static ferryman_route_t *
ferryman_find_route(ferryman_route_t *routes, ngx_uint_t n, u_char *data,
    size_t len)
{
    int          rc;
    ngx_uint_t   lo, hi, mid;

    lo = 0;
    hi = n;

    /* The lowest index whose path is not below the key. */
    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        rc = ngx_ferryman_path_cmp(&routes[mid].path, data, len);

        if (rc < 0) {
            lo = mid + 1;

        } else {
            hi = mid;
        }
    }

    if (lo < n && routes[lo].path.len == len
        && ngx_memcmp(routes[lo].path.data, data, len) == 0)
    {
        return &routes[lo];
    }

    return NULL;
}


/* The redirect field's listener suffix, "<0|1>:<http>:<https>" (configs/
 * routes.py): the host is served on those GlobalConfiguration listeners only.
 * A malformed suffix serves it nowhere ("-" never names a listener). */
static void
ferryman_parse_listeners(ferryman_host_t *host, ngx_str_t *field)
{
    u_char  *start, *end, *colon;

    host->listeners = 1;
    ngx_str_set(&host->listen_http, "-");
    ngx_str_set(&host->listen_https, "-");

    if (field->len < 5 || field->data[1] != ':') {
        return;
    }

    start = field->data + 2;
    end = field->data + field->len;
    colon = ngx_strlchr(start, end, ':');

    if (colon == NULL || colon == start || colon + 1 == end) {
        return;
    }

    host->listen_http.data = start;
    host->listen_http.len = colon - start;
    host->listen_https.data = colon + 1;
    host->listen_https.len = end - colon - 1;
}


/* Whether listener (data, len) is one of "want"'s comma-separated names
 * (configs/routes.py: an Ingress's nginx.org/listen-ports give several, named
 * by port; "0" stands for the default ports, whose listener is ""). */
static ngx_uint_t
ferryman_listed(ngx_str_t *want, u_char *data, size_t len)
{
    u_char  *pos, *end, *comma;
    size_t   n;

    pos = want->data;
    end = pos + want->len;

    while (pos < end) {
        comma = ngx_strlchr(pos, end, ',');
        if (comma == NULL) {
            comma = end;
        }

        n = comma - pos;

        if (n == 1 && pos[0] == '0') {
            if (len == 0) {
                return 1;
            }

        } else if (n == len && ngx_memcmp(pos, data, len) == 0) {
            return 1;
        }

        pos = comma + 1;
    }

    return 0;
}


/* Whether the request came in on a listener the host is not served on. */
ngx_uint_t
ferryman_wrong_listener(ngx_http_request_t *r, ferryman_host_t *host,
    ngx_uint_t https)
{
    size_t                      len;
    u_char                     *data;
    ngx_str_t                  *want;
    ngx_http_variable_value_t  *vv;

    len = 0;
    data = NULL;

    if (ferryman_listener_index != NGX_ERROR) {
        vv = ngx_http_get_indexed_variable(r, ferryman_listener_index);
        if (vv != NULL && !vv->not_found) {
            len = vv->len;
            data = vv->data;
        }
    }

    if (!host->listeners) {
        return len != 0;
    }

    want = https ? &host->listen_https : &host->listen_http;

    return !ferryman_listed(want, data, len);
}


/* "<tls> <redirect> <default> <balancing> <route> ..." (configs/routes.py). */
ngx_int_t
ferryman_parse_host(ngx_pool_t *pool, ferryman_host_t *host, ngx_str_t *text)
{
    u_char            *pos, *end;
    ngx_str_t          field;
    ngx_uint_t         n, fields;
    ferryman_route_t   route;

    pos = text->data;
    end = pos + text->len;
    fields = ngx_ferryman_count_fields(text);

    host->exact = ngx_palloc(pool, fields * sizeof(ferryman_route_t));
    host->prefix = ngx_palloc(pool, fields * sizeof(ferryman_route_t));
    if (host->exact == NULL || host->prefix == NULL) {
        return NGX_ERROR;
    }

    for (n = 0; ngx_ferryman_field(&pos, end, &field) == NGX_OK; n++) {

        switch (n) {

        case 0:  /* tls: the certificate phase's business */
            break;

        case 1:
            host->redirect = (field.len >= 1 && field.data[0] == '1');
            if (field.len > 1) {
                ferryman_parse_listeners(host, &field);
            }
            break;

        case 2:
            if (!(field.len == 1 && field.data[0] == '-')) {
                host->default_backend = field;
            }
            break;

        case 3:
            ferryman_parse_balancing(host, &field);
            break;

        default:
            if (ferryman_parse_route(&field, &route) != NGX_OK) {
                break;
            }

            if (field.data[0] == 'E') {
                host->exact[host->nexact++] = route;

            } else if (field.data[0] == 'P') {
                host->prefix[host->nprefix++] = route;
            }
        }
    }

    if (n < 4) {
        return NGX_DECLINED;
    }

    /* Sorted, so a path is found in log time whatever the number of routes
     * (ferryman.lua hashes them instead). */
    ngx_qsort(host->exact, host->nexact, sizeof(ferryman_route_t),
              ferryman_route_cmp);
    ngx_qsort(host->prefix, host->nprefix, sizeof(ferryman_route_t),
              ferryman_route_cmp);

    host->root = ferryman_find_route(host->prefix, host->nprefix,
                                     (u_char *) "/", 1);

    return NGX_OK;
}


/* configs/routes.py::match: Exact on the path as it is; then the longest
 * Prefix that equals the path without its trailing slashes, or a part of it
 * that ends just before a "/"; then "/", then the default backend. */
ngx_str_t *
ferryman_match(ferryman_host_t *host, ngx_str_t *uri)
{
    size_t             len;
    ferryman_route_t  *r;

    r = ferryman_find_route(host->exact, host->nexact, uri->data, uri->len);
    if (r != NULL) {
        return &r->backend;
    }

    len = uri->len;
    while (len > 0 && uri->data[len - 1] == '/') {
        len--;
    }

    /* The path without its trailing slashes, then each part of it that ends
     * just before a "/", longest first: one look-up per path element. */
    while (len > 0) {
        r = ferryman_find_route(host->prefix, host->nprefix, uri->data, len);
        if (r != NULL) {
            return &r->backend;
        }

        do {
            len--;
        } while (len > 0 && uri->data[len] != '/');
    }

    if (host->root != NULL) {
        return &host->root->backend;
    }

    return host->default_backend.len ? &host->default_backend : NULL;
}
