/*
 * VirtualServer routes the module serves itself (ngx_http_ferryman_vs.c):
 * what the rest of the module needs of them.
 */

#ifndef _NGX_HTTP_FERRYMAN_VS_H_INCLUDED_
#define _NGX_HTTP_FERRYMAN_VS_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_limit.h"
#include "ngx_http_ferryman_access.h"


/* How a request's peers are chosen and tried: an Ingress host's, or a
 * VirtualServer upstream's. */
typedef struct {
    ngx_uint_t              max_fails;
    ngx_msec_t              fail_timeout;
    /* 0: the location's own */
    ngx_msec_t              connect_timeout;
    ngx_msec_t              read_timeout;
    ngx_msec_t              send_timeout;
    ngx_uint_t              tries;       /* 0: each peer once */
    unsigned                least_conn:1;
} ferryman_balance_t;


typedef struct {
    ngx_str_t               backend;     /* the endpoint set's key */
    ferryman_balance_t      balance;
} ferryman_vs_upstream_t;


typedef struct ferryman_vs_s  ferryman_vs_t;
typedef struct ferryman_vs_rewrite_s  ferryman_vs_rewrite_t;


/* The F record's routes, decoded into pool; NULL when the record is
 * malformed (the host then goes to the slow path as a whole). */
ferryman_vs_t *ferryman_vs_parse(ngx_pool_t *pool, ngx_log_t *log,
    ngx_str_t *text);

/* The upstream this request is proxied to, the route's rate limits and
 * accessControl and its rewrite (NULL: none) (NGX_OK); NGX_HTTP_NOT_FOUND:
 * no route, and the
 * VirtualServer's own rate limits and accessControl (*limits, *access)
 * apply before that answer; NGX_DECLINED: the slow
 * path answers it (no route, a route it must serve, an auto_redirect); or
 * NGX_HTTP_INTERNAL_SERVER_ERROR: a regex failed to run, answered at once. */
ngx_int_t ferryman_vs_route(ngx_http_request_t *r, ferryman_vs_t *vs,
    ferryman_vs_upstream_t **upstream, ferryman_limits_t **limits,
    ferryman_access_t **access, ferryman_vs_rewrite_t **rewrite);

/* The route's rewrite of r->uri, once the request is sure to be proxied:
 * NGX_OK, or NGX_HTTP_INTERNAL_SERVER_ERROR (ngx_http_ferryman_vs_rewrite.c).
 */
ngx_int_t ferryman_vs_rewrite(ngx_http_request_t *r, ferryman_vs_rewrite_t *rw);


#endif /* _NGX_HTTP_FERRYMAN_VS_H_INCLUDED_ */
