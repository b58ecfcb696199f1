/*
 * What ngx_http_ferryman_module exports to ngx_stream_ferryman_module: the
 * records ferryman pushes and the per-peer state both keep in the one zone
 * (see the end of ngx_http_ferryman_module.c).
 */

#ifndef _NGX_FERRYMAN_STREAM_API_H_INCLUDED_
#define _NGX_FERRYMAN_STREAM_API_H_INCLUDED_

#include <ngx_config.h>
#include <ngx_core.h>


/* A copy of the record named key ("S:..." or "E:...") in pool, value->len 0
 * when there is none, and its round-robin slot. NGX_DECLINED: no zone. */
ngx_int_t ngx_ferryman_stream_record(ngx_str_t *key, ngx_pool_t *pool,
    ngx_str_t *value, uint32_t *slot);
/* The slot's round-robin counter, moved on by one. */
ngx_uint_t ngx_ferryman_stream_next(uint32_t slot);
/* Whether the peer is out (max_fails failures within the open window; 0
 * never), and its connections open now over all workers. */
void ngx_ferryman_stream_peer_state(ngx_str_t *name, uint32_t hash,
    ngx_uint_t max_fails, ngx_uint_t *down, ngx_uint_t *active);
/* One more connection to the peer; returns whether it was counted. */
ngx_uint_t ngx_ferryman_stream_enter(ngx_str_t *name, uint32_t hash);
/* One connection fewer (when counted), and a failure opening or extending a
 * window of failed_for milliseconds (0: not failed). */
void ngx_ferryman_stream_leave(ngx_str_t *name, uint32_t hash,
    ngx_uint_t counted, ngx_msec_t failed_for);

#endif /* _NGX_FERRYMAN_STREAM_API_H_INCLUDED_ */
