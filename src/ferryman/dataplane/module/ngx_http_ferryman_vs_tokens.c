/*
 * The F record's tokens (the grammar: ngx_http_ferryman_vs_parse.c): each
 * reader takes one token at ps->p, bounded by the record's end, counts by
 * the bytes left and numbers by their width, and moves past it.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_vs_record.h"


/* The record: tokens. */

ngx_int_t
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


ngx_int_t
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


ngx_int_t
ferryman_vs_number(ferryman_vs_parser_t *ps, ngx_uint_t max, ngx_uint_t *n)
{
    if (ferryman_vs_digits(ps, max, n) != NGX_OK) {
        return NGX_ERROR;
    }

    return ferryman_vs_end_token(ps);
}


/* A count of things each taking at least two bytes: never more than the
 * bytes left, so no allocation exceeds the record's size. */
ngx_int_t
ferryman_vs_count(ferryman_vs_parser_t *ps, ngx_uint_t *n)
{
    if (ferryman_vs_number(ps, FERRYMAN_VS_MAX_NUMBER, n) != NGX_OK) {
        return NGX_ERROR;
    }

    return *n <= (ngx_uint_t) (ps->end - ps->p) ? NGX_OK : NGX_ERROR;
}


ngx_int_t
ferryman_vs_char(ferryman_vs_parser_t *ps, u_char *c)
{
    if (ps->p == ps->end) {
        return NGX_ERROR;
    }

    *c = *ps->p++;

    return ferryman_vs_end_token(ps);
}


/* "-", the empty string, or base64 (whose alphabet has no space). */
ngx_int_t
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


ngx_int_t
ferryman_vs_flag(ferryman_vs_parser_t *ps, ngx_uint_t *flag)
{
    return ferryman_vs_number(ps, 1, flag);
}


ngx_int_t
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
ngx_regex_t *
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
