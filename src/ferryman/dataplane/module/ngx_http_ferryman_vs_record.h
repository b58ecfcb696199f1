/*
 * A VirtualServer's F record decoded (ngx_http_ferryman_vs_parse.c), shared
 * by the files that decode it and ngx_http_ferryman_vs.c, which routes
 * requests by it.
 */

#ifndef _NGX_HTTP_FERRYMAN_VS_RECORD_H_INCLUDED_
#define _NGX_HTTP_FERRYMAN_VS_RECORD_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_vs.h"
#include "ngx_http_ferryman_limit.h"
#include "ngx_http_ferryman_access.h"


#define FERRYMAN_VS_MAX_NUMBER   999999999


typedef struct {
    ngx_uint_t                weight;      /* cumulative: 1..100 */
    ferryman_vs_upstream_t   *upstream;
} ferryman_vs_split_t;


typedef struct {
    ngx_str_t                 variable;    /* lowercased, as ngx.var reads it */
    ngx_uint_t                key;
    ngx_str_t                 value;       /* kind s; the regex's, r, i */
    ngx_regex_t              *regex;       /* kinds r, i */
    unsigned                  negate:1;
} ferryman_vs_condition_t;


typedef struct {
    ferryman_vs_condition_t  *conditions;
    ngx_uint_t                nconditions;
    ferryman_vs_split_t      *splits;
    ngx_uint_t                nsplits;
} ferryman_vs_match_t;


struct ferryman_vs_rewrite_s {
    ngx_str_t                 target;
    ngx_regex_t              *regex;       /* NULL: the URI becomes target */
    ngx_str_t                 path;        /* the regex's, for the log */
};


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
    ferryman_access_t        *access;      /* NULL: none */
    ferryman_vs_rewrite_t    *rewrite;     /* NULL: none */
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
    ferryman_access_t        *access;      /* g: for no route, NULL: none */
};


typedef struct {
    u_char                   *p;
    u_char                   *end;
    ngx_pool_t               *pool;
    ngx_log_t                *log;
    ngx_array_t               upstreams;   /* ferryman_vs_upstream_t */
} ferryman_vs_parser_t;


/* Inside the .so only (see ngx_http_ferryman.h). */
#pragma GCC visibility push(hidden)

/* ngx_http_ferryman_vs_tokens.c: NGX_OK, or NGX_ERROR (the record is
 * rejected). */
ngx_int_t ferryman_vs_end_token(ferryman_vs_parser_t *ps);
ngx_int_t ferryman_vs_digits(ferryman_vs_parser_t *ps, ngx_uint_t max,
    ngx_uint_t *n);
ngx_int_t ferryman_vs_number(ferryman_vs_parser_t *ps, ngx_uint_t max,
    ngx_uint_t *n);
ngx_int_t ferryman_vs_count(ferryman_vs_parser_t *ps, ngx_uint_t *n);
ngx_int_t ferryman_vs_char(ferryman_vs_parser_t *ps, u_char *c);
ngx_int_t ferryman_vs_string(ferryman_vs_parser_t *ps, ngx_str_t *s);
ngx_int_t ferryman_vs_flag(ferryman_vs_parser_t *ps, ngx_uint_t *flag);
ngx_int_t ferryman_vs_msec(ferryman_vs_parser_t *ps, ngx_msec_t *ms);
/* The compiled pattern; NULL: not a pattern PCRE takes. */
ngx_regex_t *ferryman_vs_regex(ferryman_vs_parser_t *ps, ngx_str_t *pattern,
    ngx_uint_t caseless);

/* ngx_http_ferryman_vs_limits.c */
ngx_int_t ferryman_vs_parse_limits(ferryman_vs_parser_t *ps,
    ferryman_limits_t **out);

/* ngx_http_ferryman_vs_rewrite.c: kind 'w' or 'r'. */
ngx_int_t ferryman_vs_parse_rewrite(ferryman_vs_parser_t *ps,
    ferryman_vs_location_t *loc, u_char kind);

/* ngx_http_ferryman_access.c */
ngx_int_t ferryman_vs_parse_access(ferryman_vs_parser_t *ps,
    ferryman_access_t **out);


#pragma GCC visibility pop


#endif /* _NGX_HTTP_FERRYMAN_VS_RECORD_H_INCLUDED_ */
