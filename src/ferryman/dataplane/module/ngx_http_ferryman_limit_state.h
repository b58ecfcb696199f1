/*
 * The rate limits' state, shared by the files of ngx_http_ferryman_limit.c's
 * part of the module: the zone's nodes and the keys they are found by.
 */

#ifndef _NGX_HTTP_FERRYMAN_LIMIT_STATE_H_INCLUDED_
#define _NGX_HTTP_FERRYMAN_LIMIT_STATE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_limit.h"


/* Limits per route looked up without an allocation. */
#define FERRYMAN_LIMIT_FEW         8


/* Laid over the tree node from its color on, as limit_req's. */
typedef struct {
    u_char                  color;
    u_char                  dummy;
    u_short                 count;       /* requests between lookup and account */
    uint32_t                len;
    ngx_queue_t             queue;
    ngx_msec_t              last;
    ngx_int_t               excess;
    ngx_int_t               rate;        /* the zone's, for expiry */
    u_char                  data[1];     /* zone, '\0', key */
} ferryman_limit_node_t;


typedef struct {
    ngx_rbtree_t            rbtree;
    ngx_rbtree_node_t       sentinel;
    ngx_queue_t             queue;
} ferryman_limit_shctx_t;


extern ngx_module_t     ngx_http_ferryman_module;


/* Inside the .so only (see ngx_http_ferryman.h). */
#pragma GCC visibility push(hidden)

/* "ferryman_fast_limits" (ngx_http_ferryman_limit_zone.c), NULL: none. */
extern ngx_shm_zone_t  *ferryman_limit_zone;


/* ngx_http_ferryman_limit_key.c: "<zone>\0<key>" into key; the key part's
 * length into *len (0: empty, not limited). */
ngx_int_t ferryman_limit_key(ngx_http_request_t *r, ferryman_limit_t *limit,
    ngx_str_t *key, size_t *len);


#pragma GCC visibility pop


#endif /* _NGX_HTTP_FERRYMAN_LIMIT_STATE_H_INCLUDED_ */
