/*
 * ngx_stream_ferryman_module's insides, shared by its files (the overview is
 * in ngx_stream_ferryman_module.c).
 */

#ifndef _NGX_STREAM_FERRYMAN_H_INCLUDED_
#define _NGX_STREAM_FERRYMAN_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_stream.h>


#define FERRYMAN_STREAM_MAX_KEY  1024

enum {
    FERRYMAN_RR = 0,
    FERRYMAN_LC,
    FERRYMAN_RANDOM,
    FERRYMAN_RANDOM2,
    FERRYMAN_RANDOM2_LC
};


typedef struct {
    ngx_str_t                 listener;
    ngx_int_t                 sni_index;    /* NGX_ERROR: no SNI key */
    ngx_addr_t               *fallback;
    ngx_flag_t                terminate;    /* TLS ends here: SNI, then no host */
    ngx_flag_t                suffixes;     /* every covering wildcard, not one */
} ngx_stream_ferryman_srv_conf_t;


typedef struct {
    struct sockaddr          *sockaddr;
    socklen_t                 socklen;
    ngx_str_t                 name;
    uint32_t                  hash;
} ferryman_stream_peer_t;


typedef struct {
    ngx_stream_session_t     *session;
    ferryman_stream_peer_t   *peers;
    ngx_uint_t                npeers;       /* primary, then backup */
    ngx_uint_t                nprimary;
    uint32_t                  slot;
    ngx_uint_t                method;
    ngx_uint_t                max_fails;
    ngx_msec_t                fail_timeout;
    ngx_uint_t                max_conns;
    ngx_uint_t                next_upstream;
    ngx_msec_t                next_upstream_timeout;
    ngx_msec_t                started;
    ferryman_stream_peer_t   *current;
    ngx_uint_t                counted;
    ngx_addr_t               *fallback;     /* passthrough: not a TS host */
    uint64_t                 *tried;
} ferryman_stream_ctx_t;


extern ngx_module_t  ngx_stream_ferryman_module;


/* Inside the .so only (see ngx_http_ferryman.h). */
#pragma GCC visibility push(hidden)

/* ngx_stream_ferryman_balancer.c */
ngx_int_t ferryman_stream_init_upstream(ngx_conf_t *cf,
    ngx_stream_upstream_srv_conf_t *us);

/* ngx_stream_ferryman_records.c: a copy in pool of the record
 * "<kind>:<listener>/<name>" (name lowercased), else of its wildcard's
 * ("*.<parent>"), and its key in buf (FERRYMAN_STREAM_MAX_KEY bytes);
 * value->len 0 when there is neither. */
ngx_int_t ferryman_stream_host_record(ngx_stream_ferryman_srv_conf_t *conf,
    ngx_pool_t *pool, u_char kind, u_char *name, size_t len, u_char *buf,
    ngx_str_t *key, ngx_str_t *value);
/* The same for the listener's own record, "<kind>:<listener>". */
ngx_int_t ferryman_stream_listener_record(
    ngx_stream_ferryman_srv_conf_t *conf, ngx_pool_t *pool, u_char kind,
    u_char *buf, ngx_str_t *key, ngx_str_t *value);


#pragma GCC visibility pop


#endif /* _NGX_STREAM_FERRYMAN_H_INCLUDED_ */
