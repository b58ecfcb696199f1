/*
 * VirtualServer routes in C: the F record (kinds/virtualserver/records/fast.py writes it, next
 * to the V record the Lua slow path routes with) carries every route's
 * location and, for the routes this module can serve exactly, their matches,
 * splits and upstreams; any other route says "slow". A request takes its
 * location by NGINX's precedence over all of the host's routes (as
 * kinds/virtualserver/records/locations.py::find_location and ferryman_vs.lua); on a fast route
 * its match conditions and split pick the upstream here, on any other the
 * request goes to the slow path, which routes it from the V record as before.
 *
 * Grammar (tokens split by one space; <str> is base64, "-" when empty, so no
 * value can be read as structure):
 *
 *   1 <item> ...
 *   u <backend:str> <least_conn 0|1> <max_fails> <fail_timeout ms>
 *     <connect ms> <read ms> <send ms> <tries>          (upstreams, from 1)
 *   l <E|N|P|X|I> <path:str> <proxies 0|1> s            (a slow route)
 *   l <E|N|P|X|I> <path:str> <proxies 0|1> f <n> <match>... <splits>
 *   l <E|N|P|X|I> <path:str> <proxies 0|1> q <limits> <n> <match>... <splits>
 *     (q: a fast route under rate limits, ngx_http_ferryman_limit.c)
 *   l <E|N|P|X|I> <path:str> <proxies 0|1> a <access> <f|q ...>
 *     (a: a fast route under an accessControl Policy, checked after its
 *      rate limits if any: ngx_http_ferryman_access.c)
 *   l <E|N|P|X|I> <path:str> <proxies 0|1> <w|r> <target:str> <a|f|q ...>
 *     (an Ingress route's rewrite-target, applied once the request is
 *      proxied: ngx_http_ferryman_vs_rewrite.c; r on X and I only)
 *   h <limits>     (at most one: the VirtualServer's own rate limits, for
 *                   requests no route takes, which the module then answers:
 *                   404 once the limits let them through)
 *   g <access>     (at most one: the VirtualServer's own accessControl, for
 *                   requests no route takes: the module answers them, 403
 *                   or, after h's limits if any, 404)
 *     match:  <n> <condition>... <splits>
 *     condition: <negate 0|1> <s|r|i> <variable:str> <value:str>
 *                (s: caseless string; r, i: regular expression, i caseless)
 *     splits: <n> <weight> <upstream> ...
 *     limits: <dry_run 0|1> <log level 4..7, NGX_LOG_*> <status 400..599>
 *             <n> <limit>...
 *     limit:  <zone:str> <rate, thousandths r/s> <burst> <delay>
 *             <nodelay 0|1> <n, odd> <literal:str> [<variable:str>
 *             <literal:str>]...          (the key, ${variable}s in between)
 *     access: <allow 0|1> <n> <network>...   (allow: "deny all" after
 *             the networks, else "allow all")
 *     network: <4|6>.<address, hex, 8|32 digits>.<prefix length>
 *
 * Memory safety: every read is bounded by the record's end, counts by the
 * bytes left, numbers by their width; anything unexpected rejects the whole
 * record, and the host is then served by the slow path.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_vs_record.h"
#include "ngx_ferryman_fields.h"


/* The record: items. */

static ngx_int_t
ferryman_vs_parse_upstream(ferryman_vs_parser_t *ps)
{
    ngx_uint_t               lc;
    ferryman_vs_upstream_t  *u;

    u = ngx_array_push(&ps->upstreams);
    if (u == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(u, sizeof(ferryman_vs_upstream_t));

    if (ferryman_vs_string(ps, &u->backend) != NGX_OK
        || u->backend.len == 0
        || ferryman_vs_flag(ps, &lc) != NGX_OK
        || ferryman_vs_number(ps, FERRYMAN_VS_MAX_NUMBER, &u->balance.max_fails)
           != NGX_OK
        || ferryman_vs_msec(ps, &u->balance.fail_timeout) != NGX_OK
        || ferryman_vs_msec(ps, &u->balance.connect_timeout) != NGX_OK
        || ferryman_vs_msec(ps, &u->balance.read_timeout) != NGX_OK
        || ferryman_vs_msec(ps, &u->balance.send_timeout) != NGX_OK
        || ferryman_vs_number(ps, FERRYMAN_VS_MAX_NUMBER, &u->balance.tries)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    u->balance.least_conn = lc;

    return NGX_OK;
}


static ngx_int_t
ferryman_vs_parse_splits(ferryman_vs_parser_t *ps, ferryman_vs_match_t *m)
{
    ngx_uint_t               i, n, weight, total, which;
    ferryman_vs_upstream_t  *upstreams;

    if (ferryman_vs_count(ps, &n) != NGX_OK || n == 0) {
        return NGX_ERROR;
    }

    m->splits = ngx_palloc(ps->pool, n * sizeof(ferryman_vs_split_t));
    if (m->splits == NULL) {
        return NGX_ERROR;
    }

    m->nsplits = n;
    upstreams = ps->upstreams.elts;
    total = 0;

    for (i = 0; i < n; i++) {
        if (ferryman_vs_number(ps, 100, &weight) != NGX_OK
            || ferryman_vs_number(ps, ps->upstreams.nelts, &which) != NGX_OK
            || which == 0)
        {
            return NGX_ERROR;
        }

        total += weight;
        m->splits[i].weight = total;
        m->splits[i].upstream = &upstreams[which - 1];
    }

    return NGX_OK;
}


static ngx_int_t
ferryman_vs_parse_condition(ferryman_vs_parser_t *ps,
    ferryman_vs_condition_t *c)
{
    u_char      kind;
    ngx_str_t   variable, value;
    ngx_uint_t  negate;

    if (ferryman_vs_flag(ps, &negate) != NGX_OK
        || ferryman_vs_char(ps, &kind) != NGX_OK
        || ferryman_vs_string(ps, &variable) != NGX_OK
        || variable.len == 0
        || ferryman_vs_string(ps, &value) != NGX_OK)
    {
        return NGX_ERROR;
    }

    c->negate = negate;
    c->variable.len = variable.len;
    c->variable.data = ngx_pnalloc(ps->pool, variable.len);
    if (c->variable.data == NULL) {
        return NGX_ERROR;
    }

    c->key = ngx_hash_strlow(c->variable.data, variable.data, variable.len);

    switch (kind) {

    case 's':
        c->value = value;
        return NGX_OK;

    case 'r':
    case 'i':
        /* Kept for the log line of a regex that fails to run. */
        c->value = value;
        c->regex = ferryman_vs_regex(ps, &value, kind == 'i');
        return c->regex != NULL ? NGX_OK : NGX_ERROR;

    default:
        return NGX_ERROR;
    }
}


static ngx_int_t
ferryman_vs_parse_match(ferryman_vs_parser_t *ps, ferryman_vs_match_t *m,
    ngx_uint_t conditions)
{
    ngx_uint_t  i, n;

    n = 0;

    if (conditions && (ferryman_vs_count(ps, &n) != NGX_OK || n == 0)) {
        return NGX_ERROR;
    }

    if (n > 0) {
        m->conditions = ngx_pcalloc(ps->pool,
                                    n * sizeof(ferryman_vs_condition_t));
        if (m->conditions == NULL) {
            return NGX_ERROR;
        }
    }

    m->nconditions = n;

    for (i = 0; i < n; i++) {
        if (ferryman_vs_parse_condition(ps, &m->conditions[i]) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return ferryman_vs_parse_splits(ps, m);
}


static ngx_int_t
ferryman_vs_parse_location(ferryman_vs_parser_t *ps,
    ferryman_vs_location_t *loc)
{
    u_char      kind;
    ngx_uint_t  i, n, proxies;

    if (ferryman_vs_char(ps, &loc->modifier) != NGX_OK
        || ngx_strlchr((u_char *) "ENPXI", (u_char *) "ENPXI" + 5,
                       loc->modifier) == NULL
        || ferryman_vs_string(ps, &loc->path) != NGX_OK
        || ferryman_vs_flag(ps, &proxies) != NGX_OK
        || ferryman_vs_char(ps, &kind) != NGX_OK)
    {
        return NGX_ERROR;
    }

    loc->proxies = proxies;

    if (loc->modifier == 'X' || loc->modifier == 'I') {
        loc->regex = ferryman_vs_regex(ps, &loc->path, loc->modifier == 'I');
        if (loc->regex == NULL) {
            return NGX_ERROR;
        }

    } else if (loc->path.len == 0) {
        return NGX_ERROR;
    }

    if (kind == 's') {
        return NGX_OK;
    }

    if (kind == 'w' || kind == 'r') {
        if (ferryman_vs_parse_rewrite(ps, loc, kind) != NGX_OK
            || ferryman_vs_char(ps, &kind) != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    if (kind == 'a') {
        if (ferryman_vs_parse_access(ps, &loc->access) != NGX_OK
            || ferryman_vs_char(ps, &kind) != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    if (kind == 'q') {
        if (ferryman_vs_parse_limits(ps, &loc->limits) != NGX_OK) {
            return NGX_ERROR;
        }

    } else if (kind != 'f') {
        return NGX_ERROR;
    }

    if (ferryman_vs_count(ps, &n) != NGX_OK) {
        return NGX_ERROR;
    }

    loc->matches = ngx_pcalloc(ps->pool, (n + 1) * sizeof(ferryman_vs_match_t));
    if (loc->matches == NULL) {
        return NGX_ERROR;
    }

    loc->nmatches = n + 1;

    for (i = 0; i <= n; i++) {
        if (ferryman_vs_parse_match(ps, &loc->matches[i], i < n) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    loc->fast = 1;

    return NGX_OK;
}


/* Paths ordered by length, then bytes, then record order. */
static int ngx_libc_cdecl
ferryman_vs_location_cmp(const void *one, const void *two)
{
    ferryman_vs_location_t  *a = *(ferryman_vs_location_t **) one;
    ferryman_vs_location_t  *b = *(ferryman_vs_location_t **) two;

    int  rc;

    rc = ngx_ferryman_path_cmp(&a->path, b->path.data, b->path.len);
    if (rc != 0) {
        return rc;
    }

    return (a->index > b->index) - (a->index < b->index);
}


static int ngx_libc_cdecl
ferryman_vs_str_cmp(const void *one, const void *two)
{
    const ngx_str_t  *a = one, *b = two;

    if (a->len != b->len) {
        return a->len < b->len ? -1 : 1;
    }

    return ngx_memcmp(a->data, b->data, a->len);
}


static int ngx_libc_cdecl
ferryman_vs_length_cmp(const void *one, const void *two)
{
    const size_t  *a = one, *b = two;

    return (*a < *b) - (*a > *b);
}


/* Sorted, then one location per path: the last in the record, as the Lua
 * router's tables keep it. */
static ngx_uint_t
ferryman_vs_unique(ferryman_vs_location_t **locs, ngx_uint_t n)
{
    ngx_uint_t  i, kept;

    ngx_qsort(locs, n, sizeof(ferryman_vs_location_t *),
              ferryman_vs_location_cmp);

    kept = 0;

    for (i = 0; i < n; i++) {
        if (kept > 0 && locs[kept - 1]->path.len == locs[i]->path.len
            && ngx_memcmp(locs[kept - 1]->path.data, locs[i]->path.data,
                          locs[i]->path.len) == 0)
        {
            locs[kept - 1] = locs[i];
            continue;
        }

        locs[kept++] = locs[i];
    }

    return kept;
}


ferryman_vs_t *
ferryman_vs_parse(ngx_pool_t *pool, ngx_log_t *log, ngx_str_t *text)
{
    u_char                   item;
    ngx_uint_t               i, n;
    ngx_array_t              locations;
    ferryman_vs_t           *vs;
    ferryman_limits_t       *host_limits;
    ferryman_access_t       *host_access;
    ferryman_vs_parser_t     ps;
    ferryman_vs_location_t  *loc, *locs;

    host_limits = NULL;
    host_access = NULL;
    ps.p = text->data;
    ps.end = text->data + text->len;
    ps.pool = pool;
    ps.log = log;

    if (ngx_array_init(&ps.upstreams, pool, 4, sizeof(ferryman_vs_upstream_t))
        != NGX_OK
        || ngx_array_init(&locations, pool, 4, sizeof(ferryman_vs_location_t))
           != NGX_OK)
    {
        return NULL;
    }

    if (ferryman_vs_number(&ps, 1, &n) != NGX_OK || n != 1) {
        return NULL;
    }

    while (ps.p < ps.end) {
        if (ferryman_vs_char(&ps, &item) != NGX_OK) {
            return NULL;
        }

        if (item == 'u') {
            /* Locations point at upstreams: all come first, so none moves
             * once a location points at it. */
            if (locations.nelts > 0 || ferryman_vs_parse_upstream(&ps) != NGX_OK) {
                return NULL;
            }

            continue;
        }

        if (item == 'h') {
            if (host_limits != NULL
                || ferryman_vs_parse_limits(&ps, &host_limits) != NGX_OK)
            {
                return NULL;
            }

            continue;
        }

        if (item == 'g') {
            if (host_access != NULL
                || ferryman_vs_parse_access(&ps, &host_access) != NGX_OK)
            {
                return NULL;
            }

            continue;
        }

        if (item != 'l') {
            return NULL;
        }

        loc = ngx_array_push(&locations);
        if (loc == NULL) {
            return NULL;
        }

        ngx_memzero(loc, sizeof(ferryman_vs_location_t));
        loc->index = locations.nelts - 1;

        if (ferryman_vs_parse_location(&ps, loc) != NGX_OK) {
            return NULL;
        }
    }

    n = locations.nelts;
    locs = locations.elts;

    vs = ngx_pcalloc(pool, sizeof(ferryman_vs_t));
    if (vs == NULL) {
        return NULL;
    }

    vs->limits = host_limits;
    vs->access = host_access;

    vs->exact = ngx_palloc(pool, (n + 1) * sizeof(ferryman_vs_location_t *));
    vs->prefix = ngx_palloc(pool, (n + 1) * sizeof(ferryman_vs_location_t *));
    vs->regex = ngx_palloc(pool, (n + 1) * sizeof(ferryman_vs_location_t *));
    vs->proxying = ngx_palloc(pool, (n + 1) * sizeof(ngx_str_t));
    vs->lengths = ngx_palloc(pool, (n + 1) * sizeof(size_t));
    if (vs->exact == NULL || vs->prefix == NULL || vs->regex == NULL
        || vs->proxying == NULL || vs->lengths == NULL)
    {
        return NULL;
    }

    for (i = 0; i < n; i++) {
        loc = &locs[i];

        switch (loc->modifier) {

        case 'E':
            vs->exact[vs->nexact++] = loc;
            break;

        case 'X':
        case 'I':
            vs->regex[vs->nregex++] = loc;
            break;

        default:
            vs->prefix[vs->nprefix++] = loc;
        }

        if (loc->proxies && loc->regex == NULL
            && loc->path.data[loc->path.len - 1] == '/')
        {
            vs->proxying[vs->nproxying].data = loc->path.data;
            vs->proxying[vs->nproxying].len = loc->path.len - 1;
            vs->nproxying++;
        }
    }

    vs->nexact = ferryman_vs_unique(vs->exact, vs->nexact);
    vs->nprefix = ferryman_vs_unique(vs->prefix, vs->nprefix);
    ngx_qsort(vs->proxying, vs->nproxying, sizeof(ngx_str_t),
              ferryman_vs_str_cmp);

    for (i = 0; i < vs->nprefix; i++) {
        if (vs->nlengths == 0
            || vs->lengths[vs->nlengths - 1] != vs->prefix[i]->path.len)
        {
            vs->lengths[vs->nlengths++] = vs->prefix[i]->path.len;
        }
    }

    ngx_qsort(vs->lengths, vs->nlengths, sizeof(size_t),
              ferryman_vs_length_cmp);

    return vs;
}
