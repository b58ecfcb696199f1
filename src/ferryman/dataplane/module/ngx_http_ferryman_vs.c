/*
 * VirtualServer routes in C, for requests: a request takes its location by
 * NGINX's precedence over all of the host's routes (as
 * kinds/virtualserver/records/locations.py::find_location and ferryman_vs.lua); on a fast route
 * its match conditions and split pick the upstream here, on any other the
 * request goes to the slow path, which routes it from the V record as before.
 * The F record these routes come from: ngx_http_ferryman_vs_parse.c.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_vs_record.h"
#include "ngx_ferryman_fields.h"


/* Requests. */

static ferryman_vs_location_t *
ferryman_vs_find(ferryman_vs_location_t **locs, ngx_uint_t n, u_char *data,
    size_t len)
{
    ngx_int_t   rc;
    ngx_uint_t  lo, hi, mid;

    lo = 0;
    hi = n;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        rc = ngx_ferryman_path_cmp(&locs[mid]->path, data, len);

        if (rc == 0) {
            return locs[mid];
        }

        if (rc < 0) {
            lo = mid + 1;

        } else {
            hi = mid;
        }
    }

    return NULL;
}


static ngx_uint_t
ferryman_vs_proxying(ferryman_vs_t *vs, ngx_str_t *uri)
{
    ngx_int_t   rc;
    ngx_uint_t  lo, hi, mid;

    lo = 0;
    hi = vs->nproxying;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        rc = ngx_ferryman_path_cmp(&vs->proxying[mid], uri->data, uri->len);

        if (rc == 0) {
            return 1;
        }

        if (rc < 0) {
            lo = mid + 1;

        } else {
            hi = mid;
        }
    }

    return 0;
}


/* A regex PCRE could not run to its end (its match limit or stack
 * exhausted by a long subject) neither matched nor missed: the request ends
 * with 500, as NGINX ends it for a location regex that fails, rather than
 * take a route, or skip a condition, it was not meant to. */
static ngx_int_t
ferryman_vs_regex_failed(ngx_http_request_t *r, ngx_str_t *pattern,
    ngx_int_t rc, const char *what)
{
    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "ferryman: %s regex \"%V\" of host \"%V\" failed: %i",
                  what, pattern, &r->headers_in.server, rc);

    return NGX_HTTP_INTERNAL_SERVER_ERROR;
}


/* NGINX's location choice (vs_routes.find_location, ferryman_vs.lua's
 * find_route); NULL: none (*none set), what the slow path answers (an
 * auto_redirect), or a regex that failed to run (*failed set). */
static ferryman_vs_location_t *
ferryman_vs_location(ngx_http_request_t *r, ferryman_vs_t *vs,
    ngx_uint_t *none, ngx_int_t *failed)
{
    ngx_int_t                rc;
    ngx_str_t               *uri;
    ngx_uint_t               i;
    ferryman_vs_location_t  *loc, *longest;

    uri = &r->uri;

    loc = ferryman_vs_find(vs->exact, vs->nexact, uri->data, uri->len);
    if (loc != NULL) {
        return loc;
    }

    longest = ferryman_vs_find(vs->prefix, vs->nprefix, uri->data, uri->len);

    if (longest == NULL) {
        if (ferryman_vs_proxying(vs, uri)) {
            return NULL;
        }

        for (i = 0; i < vs->nlengths && longest == NULL; i++) {
            if (vs->lengths[i] < uri->len) {
                longest = ferryman_vs_find(vs->prefix, vs->nprefix, uri->data,
                                           vs->lengths[i]);
            }
        }
    }

    if (longest != NULL && longest->modifier == 'N') {
        return longest;
    }

    for (i = 0; i < vs->nregex; i++) {
        rc = ngx_regex_exec(vs->regex[i]->regex, uri, NULL, 0);

        if (rc >= 0) {
            return vs->regex[i];
        }

        if (rc != NGX_REGEX_NO_MATCHED) {
            *failed = ferryman_vs_regex_failed(r, &vs->regex[i]->path, rc,
                                               "route");
            return NULL;
        }
    }

    *none = (longest == NULL);

    return longest;
}


static ngx_int_t
ferryman_vs_holds(ngx_http_request_t *r, ferryman_vs_condition_t *c)
{
    size_t                      i;
    ngx_int_t                   rc;
    ngx_str_t                   actual;
    ngx_uint_t                  found;
    ngx_http_variable_value_t  *v;

    v = ngx_http_get_variable(r, &c->variable, c->key);

    if (v == NULL || v->not_found) {
        actual.len = 0;
        actual.data = (u_char *) "";

    } else {
        actual.len = v->len;
        actual.data = v->data;
    }

    if (c->regex != NULL) {
        found = 0;

        if (actual.len > 0) {
            rc = ngx_regex_exec(c->regex, &actual, NULL, 0);

            if (rc >= 0) {
                found = 1;

            } else if (rc != NGX_REGEX_NO_MATCHED) {
                return ferryman_vs_regex_failed(r, &c->value, rc, "condition");
            }
        }

    } else {
        found = actual.len == c->value.len;

        for (i = 0; found && i < actual.len; i++) {
            found = ngx_tolower(actual.data[i]) == ngx_tolower(c->value.data[i]);
        }
    }

    return (found != c->negate) ? NGX_OK : NGX_DECLINED;
}


ngx_int_t
ferryman_vs_route(ngx_http_request_t *r, ferryman_vs_t *vs,
    ferryman_vs_upstream_t **upstream, ferryman_limits_t **limits,
    ferryman_access_t **access, ferryman_vs_rewrite_t **rewrite)
{
    ngx_int_t                rc, failed;
    ngx_uint_t               i, j, roll, none;
    ferryman_vs_match_t     *m;
    ferryman_vs_location_t  *loc;

    none = 0;
    failed = 0;
    loc = ferryman_vs_location(r, vs, &none, &failed);

    if (failed) {
        return failed;
    }

    if (loc == NULL && none && (vs->limits != NULL || vs->access != NULL)) {
        /* No route, under the VirtualServer's own policies: the module
         * answers, as the slow path would (its limits, its access, then
         * 404). */
        *limits = vs->limits;
        *access = vs->access;
        return NGX_HTTP_NOT_FOUND;
    }

    if (loc == NULL || !loc->fast) {
        return NGX_DECLINED;
    }

    *limits = loc->limits;
    *access = loc->access;
    *rewrite = loc->rewrite;

    /* The first match whose every condition holds, else the default. */
    m = NULL;

    for (i = 0; i < loc->nmatches; i++) {
        m = &loc->matches[i];

        for (j = 0; j < m->nconditions; j++) {
            rc = ferryman_vs_holds(r, &m->conditions[j]);

            if (rc == NGX_HTTP_INTERNAL_SERVER_ERROR) {
                return rc;
            }

            if (rc != NGX_OK) {
                break;
            }
        }

        if (j == m->nconditions) {
            break;
        }
    }

    if (i == loc->nmatches || m == NULL) {
        /* Never: the default has no condition. */
        return NGX_DECLINED;
    }

    if (m->nsplits == 1) {
        *upstream = m->splits[0].upstream;
        return NGX_OK;
    }

    /* As ferryman_vs.lua's pick(): a roll of 1..100 against the running
     * weights, the last split when they fall short. */
    roll = (ngx_uint_t) ngx_random() % 100 + 1;

    for (i = 0; i < m->nsplits - 1; i++) {
        if (roll <= m->splits[i].weight) {
            break;
        }
    }

    *upstream = m->splits[i].upstream;

    return NGX_OK;
}

