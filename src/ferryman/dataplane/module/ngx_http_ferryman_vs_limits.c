/*
 * The F record's rate limits ("q" routes' and the "h" item's <limits>, see
 * the grammar in ngx_http_ferryman_vs_parse.c), decoded into what
 * ngx_http_ferryman_limit.c enforces.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_vs_record.h"


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


ngx_int_t
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
