/*
 * VirtualServer routes in C: the F record (configs/vs_fast.py writes it, next
 * to the V record the Lua slow path routes with) carries every route's
 * location and, for the routes this module can serve exactly, their matches,
 * splits and upstreams; any other route says "slow". A request takes its
 * location by NGINX's precedence over all of the host's routes (as
 * configs/vs_routes.py::find_location and ferryman_vs.lua); on a fast route
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
 *   h <limits>     (at most one: the VirtualServer's own rate limits, for
 *                   requests no route takes, which the module then answers:
 *                   404 once the limits let them through)
 *     match:  <n> <condition>... <splits>
 *     condition: <negate 0|1> <s|r|i> <variable:str> <value:str>
 *                (s: caseless string; r, i: regular expression, i caseless)
 *     splits: <n> <weight> <upstream> ...
 *     limits: <dry_run 0|1> <log level 4..7, NGX_LOG_*> <status 400..599>
 *             <n> <limit>...
 *     limit:  <zone:str> <rate, thousandths r/s> <burst> <delay>
 *             <nodelay 0|1> <n, odd> <literal:str> [<variable:str>
 *             <literal:str>]...          (the key, ${variable}s in between)
 *
 * Memory safety: every read is bounded by the record's end, counts by the
 * bytes left, numbers by their width; anything unexpected rejects the whole
 * record, and the host is then served by the slow path.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_vs.h"
#include "ngx_http_ferryman_limit.h"


#define FERRYMAN_VS_MAX_NUMBER   999999999


typedef struct {
    ngx_uint_t                weight;      /* cumulative: 1..100 */
    ferryman_vs_upstream_t   *upstream;
} ferryman_vs_split_t;


typedef struct {
    ngx_str_t                 variable;    /* lowercased, as ngx.var reads it */
    ngx_uint_t                key;
    ngx_str_t                 value;       /* kind s */
    ngx_regex_t              *regex;       /* kinds r, i */
    unsigned                  negate:1;
} ferryman_vs_condition_t;


typedef struct {
    ferryman_vs_condition_t  *conditions;
    ngx_uint_t                nconditions;
    ferryman_vs_split_t      *splits;
    ngx_uint_t                nsplits;
} ferryman_vs_match_t;


typedef struct {
    ngx_str_t                 path;
    ngx_uint_t                index;       /* in the record */
    ngx_regex_t              *regex;
    u_char                    modifier;
    unsigned                  proxies:1;
    unsigned                  fast:1;
    /* The matches, then the default (no condition). */
    ferryman_vs_match_t      *matches;
    ngx_uint_t                nmatches;
    ferryman_limits_t        *limits;      /* NULL: none */
} ferryman_vs_location_t;


struct ferryman_vs_s {
    ferryman_vs_location_t  **exact;       /* sorted, one per path */
    ngx_uint_t                nexact;
    ferryman_vs_location_t  **prefix;      /* plain and ^~, sorted, one per path */
    ngx_uint_t                nprefix;
    ferryman_vs_location_t  **regex;       /* in record order */
    ngx_uint_t                nregex;
    ngx_str_t                *proxying;    /* auto_redirect names, without the "/" */
    ngx_uint_t                nproxying;
    size_t                   *lengths;     /* of the prefixes, longest first */
    ngx_uint_t                nlengths;
    ferryman_limits_t        *limits;      /* h: for no route, NULL: none */
};


typedef struct {
    u_char                   *p;
    u_char                   *end;
    ngx_pool_t               *pool;
    ngx_log_t                *log;
    ngx_array_t               upstreams;   /* ferryman_vs_upstream_t */
} ferryman_vs_parser_t;


/* The record: tokens. */

static ngx_int_t
ferryman_vs_end_token(ferryman_vs_parser_t *ps)
{
    if (ps->p == ps->end) {
        return NGX_OK;
    }

    if (*ps->p != ' ') {
        return NGX_ERROR;
    }

    ps->p++;

    /* A space must lead to another token. */
    return ps->p < ps->end ? NGX_OK : NGX_ERROR;
}


static ngx_int_t
ferryman_vs_digits(ferryman_vs_parser_t *ps, ngx_uint_t max, ngx_uint_t *n)
{
    u_char      *start;
    ngx_uint_t   value;

    start = ps->p;
    value = 0;

    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        if (ps->p - start >= 9) {
            return NGX_ERROR;
        }

        value = value * 10 + (*ps->p - '0');
        ps->p++;
    }

    if (ps->p == start || value > max) {
        return NGX_ERROR;
    }

    *n = value;

    return NGX_OK;
}


static ngx_int_t
ferryman_vs_number(ferryman_vs_parser_t *ps, ngx_uint_t max, ngx_uint_t *n)
{
    if (ferryman_vs_digits(ps, max, n) != NGX_OK) {
        return NGX_ERROR;
    }

    return ferryman_vs_end_token(ps);
}


/* A count of things each taking at least two bytes: never more than the
 * bytes left, so no allocation exceeds the record's size. */
static ngx_int_t
ferryman_vs_count(ferryman_vs_parser_t *ps, ngx_uint_t *n)
{
    if (ferryman_vs_number(ps, FERRYMAN_VS_MAX_NUMBER, n) != NGX_OK) {
        return NGX_ERROR;
    }

    return *n <= (ngx_uint_t) (ps->end - ps->p) ? NGX_OK : NGX_ERROR;
}


static ngx_int_t
ferryman_vs_char(ferryman_vs_parser_t *ps, u_char *c)
{
    if (ps->p == ps->end) {
        return NGX_ERROR;
    }

    *c = *ps->p++;

    return ferryman_vs_end_token(ps);
}


/* "-", the empty string, or base64 (whose alphabet has no space). */
static ngx_int_t
ferryman_vs_string(ferryman_vs_parser_t *ps, ngx_str_t *s)
{
    ngx_str_t  src;

    src.data = ps->p;

    while (ps->p < ps->end && *ps->p != ' ') {
        ps->p++;
    }

    src.len = ps->p - src.data;

    if (src.len == 0) {
        return NGX_ERROR;
    }

    if (src.len == 1 && src.data[0] == '-') {
        s->len = 0;
        s->data = (u_char *) "";
        return ferryman_vs_end_token(ps);
    }

    s->data = ngx_pnalloc(ps->pool, ngx_base64_decoded_length(src.len));
    if (s->data == NULL) {
        return NGX_ERROR;
    }

    if (ngx_decode_base64(s, &src) != NGX_OK) {
        return NGX_ERROR;
    }

    return ferryman_vs_end_token(ps);
}


static ngx_int_t
ferryman_vs_flag(ferryman_vs_parser_t *ps, ngx_uint_t *flag)
{
    return ferryman_vs_number(ps, 1, flag);
}


static ngx_int_t
ferryman_vs_msec(ferryman_vs_parser_t *ps, ngx_msec_t *ms)
{
    ngx_uint_t  n;

    if (ferryman_vs_number(ps, FERRYMAN_VS_MAX_NUMBER, &n) != NGX_OK) {
        return NGX_ERROR;
    }

    *ms = (ngx_msec_t) n;

    return NGX_OK;
}


/* PCRE, as NGINX compiles a location's and the Lua router's ngx.re. */
static ngx_regex_t *
ferryman_vs_regex(ferryman_vs_parser_t *ps, ngx_str_t *pattern,
    ngx_uint_t caseless)
{
    u_char               errstr[NGX_MAX_CONF_ERRSTR];
    ngx_regex_compile_t  rc;

    if (ngx_strlchr(pattern->data, pattern->data + pattern->len, '\0')
        != NULL)
    {
        return NULL;
    }

    ngx_memzero(&rc, sizeof(ngx_regex_compile_t));

    rc.pattern.len = pattern->len;
    rc.pattern.data = ngx_pnalloc(ps->pool, pattern->len + 1);
    if (rc.pattern.data == NULL) {
        return NULL;
    }

    ngx_memcpy(rc.pattern.data, pattern->data, pattern->len);
    rc.pattern.data[pattern->len] = '\0';
    rc.pool = ps->pool;
    rc.options = caseless ? NGX_REGEX_CASELESS : 0;
    rc.err.len = NGX_MAX_CONF_ERRSTR;
    rc.err.data = errstr;

    if (ngx_regex_compile(&rc) != NGX_OK) {
        ngx_log_error(NGX_LOG_ERR, ps->log, 0,
                      "ferryman: VirtualServer regex \"%V\": %V",
                      pattern, &rc.err);
        return NULL;
    }

    return rc.regex;
}


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


/* A rate: thousandths of a request per second, 1..FERRYMAN_LIMIT_MAX_RATE
 * (13 digits at most). */
static ngx_int_t
ferryman_vs_rate(ferryman_vs_parser_t *ps, ngx_int_t *rate)
{
    u_char    *start;
    uint64_t   value;

    start = ps->p;
    value = 0;

    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        if (ps->p - start >= 13) {
            return NGX_ERROR;
        }

        value = value * 10 + (*ps->p - '0');
        ps->p++;
    }

    if (ps->p == start || value == 0 || value > FERRYMAN_LIMIT_MAX_RATE) {
        return NGX_ERROR;
    }

    *rate = (ngx_int_t) value;

    return ferryman_vs_end_token(ps);
}


static ngx_int_t
ferryman_vs_parse_limit(ferryman_vs_parser_t *ps, ferryman_limit_t *limit)
{
    u_char                *p;
    ngx_str_t              var;
    ngx_uint_t             i, n, burst, delay, nodelay;
    ferryman_limit_var_t  *v;

    if (ferryman_vs_string(ps, &limit->zone) != NGX_OK
        || limit->zone.len == 0
        || ngx_strlchr(limit->zone.data, limit->zone.data + limit->zone.len,
                       '\0') != NULL
        || ferryman_vs_rate(ps, &limit->rate) != NGX_OK
        || ferryman_vs_number(ps, FERRYMAN_VS_MAX_NUMBER, &burst) != NGX_OK
        || ferryman_vs_number(ps, FERRYMAN_VS_MAX_NUMBER, &delay) != NGX_OK
        || ferryman_vs_flag(ps, &nodelay) != NGX_OK
        || ferryman_vs_count(ps, &n) != NGX_OK
        || n % 2 == 0)
    {
        return NGX_ERROR;
    }

    limit->burst = (ngx_int_t) burst * 1000;
    /* limit_req's nodelay: a threshold no excess reaches. */
    limit->delay = nodelay ? NGX_MAX_INT_T_VALUE : (ngx_int_t) delay * 1000;

    /* NIC's zone name, as the slow path logs it: "pol_rl_" and the zone
     * with "/" and "-" as "_", then "_vs". */
    limit->log_name.len = sizeof("pol_rl_") - 1 + limit->zone.len
                          + sizeof("_vs") - 1;
    limit->log_name.data = ngx_pnalloc(ps->pool, limit->log_name.len);
    if (limit->log_name.data == NULL) {
        return NGX_ERROR;
    }

    p = ngx_cpymem(limit->log_name.data, "pol_rl_", sizeof("pol_rl_") - 1);

    for (i = 0; i < limit->zone.len; i++) {
        *p++ = (limit->zone.data[i] == '/' || limit->zone.data[i] == '-')
               ? '_' : limit->zone.data[i];
    }

    ngx_memcpy(p, "_vs", sizeof("_vs") - 1);

    limit->nvars = n / 2;
    limit->literals = ngx_palloc(ps->pool,
                                 (limit->nvars + 1) * sizeof(ngx_str_t));
    limit->vars = ngx_palloc(ps->pool,
                             (limit->nvars + 1) * sizeof(ferryman_limit_var_t));
    if (limit->literals == NULL || limit->vars == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        if (i % 2 == 0) {
            if (ferryman_vs_string(ps, &limit->literals[i / 2]) != NGX_OK) {
                return NGX_ERROR;
            }

            continue;
        }

        if (ferryman_vs_string(ps, &var) != NGX_OK || var.len == 0) {
            return NGX_ERROR;
        }

        v = &limit->vars[i / 2];
        v->name.len = var.len;
        v->name.data = ngx_pnalloc(ps->pool, var.len);
        if (v->name.data == NULL) {
            return NGX_ERROR;
        }

        v->hash = ngx_hash_strlow(v->name.data, var.data, var.len);

        if (ferryman_limit_var_known(&v->name) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


static ngx_int_t
ferryman_vs_parse_limits(ferryman_vs_parser_t *ps, ferryman_limits_t **out)
{
    ngx_uint_t          i, n, dry_run, level, status;
    ferryman_limits_t  *lim;

    lim = ngx_pcalloc(ps->pool, sizeof(ferryman_limits_t));
    if (lim == NULL) {
        return NGX_ERROR;
    }

    if (ferryman_vs_flag(ps, &dry_run) != NGX_OK
        || ferryman_vs_number(ps, NGX_LOG_INFO, &level) != NGX_OK
        || level < NGX_LOG_ERR
        || ferryman_vs_number(ps, 599, &status) != NGX_OK
        || status < 400
        || ferryman_vs_count(ps, &n) != NGX_OK
        || n == 0)
    {
        return NGX_ERROR;
    }

    lim->limits = ngx_pcalloc(ps->pool, n * sizeof(ferryman_limit_t));
    if (lim->limits == NULL) {
        return NGX_ERROR;
    }

    lim->nlimits = n;
    lim->dry_run = dry_run;
    lim->log_level = level;
    lim->status = status;

    for (i = 0; i < n; i++) {
        if (ferryman_vs_parse_limit(ps, &lim->limits[i]) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    *out = lim;

    return NGX_OK;
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

    if (a->path.len != b->path.len) {
        return a->path.len < b->path.len ? -1 : 1;
    }

    rc = ngx_memcmp(a->path.data, b->path.data, a->path.len);
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
    ferryman_vs_parser_t     ps;
    ferryman_vs_location_t  *loc, *locs;

    host_limits = NULL;
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


/* Requests. */

static ngx_int_t
ferryman_vs_path_cmp(ngx_str_t *path, u_char *data, size_t len)
{
    if (path->len != len) {
        return path->len < len ? -1 : 1;
    }

    return ngx_memcmp(path->data, data, len);
}


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
        rc = ferryman_vs_path_cmp(&locs[mid]->path, data, len);

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
        rc = ferryman_vs_path_cmp(&vs->proxying[mid], uri->data, uri->len);

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


/* NGINX's location choice (vs_routes.find_location, ferryman_vs.lua's
 * find_route); NULL: none (*none set), or what the slow path answers (an
 * auto_redirect, a regex that fails to run). */
static ferryman_vs_location_t *
ferryman_vs_location(ngx_http_request_t *r, ferryman_vs_t *vs,
    ngx_uint_t *none)
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
            /* The slow path logs it and goes on as ngx.re does. */
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
                return NGX_ERROR;
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
    ferryman_vs_upstream_t **upstream, ferryman_limits_t **limits)
{
    ngx_int_t                rc;
    ngx_uint_t               i, j, roll, none;
    ferryman_vs_match_t     *m;
    ferryman_vs_location_t  *loc;

    none = 0;
    loc = ferryman_vs_location(r, vs, &none);

    if (loc == NULL && none && vs->limits != NULL) {
        /* No route, under the VirtualServer's own limits: the module
         * answers, as the slow path would (its limits, then 404). */
        *limits = vs->limits;
        return NGX_HTTP_NOT_FOUND;
    }

    if (loc == NULL || !loc->fast) {
        return NGX_DECLINED;
    }

    *limits = loc->limits;

    /* The first match whose every condition holds, else the default. */
    m = NULL;

    for (i = 0; i < loc->nmatches; i++) {
        m = &loc->matches[i];

        for (j = 0; j < m->nconditions; j++) {
            rc = ferryman_vs_holds(r, &m->conditions[j]);

            if (rc == NGX_ERROR) {
                return NGX_DECLINED;
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
