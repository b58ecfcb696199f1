/*
 * ngx_http_ferryman_module's insides, shared by its files (the overview is in
 * ngx_http_ferryman_module.c):
 *
 *   ngx_http_ferryman_module.c      directives, variables, phase handler set-up
 *   ngx_http_ferryman_zone.c        the shared zone and its records (the
 *                                   push's FFI functions), request counters
 *   ngx_http_ferryman_cache.c       a worker's decoded records: hosts, peers
 *   ngx_http_ferryman_host.c        an Ingress host's record and path match
 *   ngx_http_ferryman_route.c       the precontent phase: a request's route
 *   ngx_http_ferryman_gateway.c     a Gateway listener's routes (X records):
 *                                   the look-up by socket and name
 *   ngx_http_ferryman_balancer.c    the upstream: peer choice per attempt
 *   ngx_http_ferryman_peers.c       per-peer state in the zone: failures,
 *                                   least_conn's counts
 *   ngx_http_ferryman_flight.c      requests in flight per peer (drains)
 *   ngx_http_ferryman_errors.c      error pages per request (custom-http-errors)
 *   ngx_http_ferryman_h2c.c         HTTP/1.x and h2c on one plaintext socket
 *                                   (NGINX before 1.25.1)
 *   ngx_http_ferryman_stream_api.c  what ngx_stream_ferryman_module calls
 *   ngx_http_ferryman_vs*.c         VirtualServer routes: the F record
 *                                   (ngx_http_ferryman_vs_record.h) and
 *                                   requests (ngx_http_ferryman_vs.h)
 *   ngx_http_ferryman_limit*.c      their rate limits (ngx_http_ferryman_limit.h)
 *   ngx_http_ferryman_access.c      their accessControl (allow/deny lists)
 *   ngx_ferryman_fields.h           record readers both .so files share
 */

#ifndef _NGX_HTTP_FERRYMAN_H_INCLUDED_
#define _NGX_HTTP_FERRYMAN_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_vs.h"


#define FERRYMAN_RR_SLOTS        65536
#define FERRYMAN_SLOT_SHARED     0x80000000
#define FERRYMAN_MAX_KEY         1024
/* A worker's cache is dropped and rebuilt past these: hosts come from
 * clients' Host headers, so unknown ones must not grow it without bound.
 * Bytes, not entries: a name can be as long as NGINX's header buffers. */
#define FERRYMAN_MAX_ENTRIES     100000
#define FERRYMAN_MAX_UNKNOWN_BYTES  (4 * 1024 * 1024)
/* RFC 1035's longest name: no virtual host (validated DNS names, "*.suffix",
 * "_") is longer, so a longer Host can only reach the catch-all. */
#define FERRYMAN_MAX_HOST_NAME   253
/* Request counters, one cache line per worker so workers never share one. */
#define FERRYMAN_COUNTER_SLOTS   64
#define FERRYMAN_COUNTER_STRIDE  8

/*
 * Requests in flight per peer: FERRYMAN_FLIGHT_BUCKETS buckets of
 * FERRYMAN_FLIGHT_WAYS slots, a bucket per cache line. A slot is one atomic
 * word: the peer's tag (a second hash of its name, FERRYMAN_FLIGHT_SHIFT bits
 * up) and its count (the low bits). A peer's bucket is chosen by its name's
 * CRC; an attempt adds one to the bucket's slot with the peer's tag or takes
 * a slot whose count is 0 (compare-and-swap, so the tag and the count change
 * together), and its free subtracts one from that same slot. No lock, and one
 * cache line per attempt: the fast path's round-robin takes no lock either.
 *
 * Why not one counter per hash slot: a peer that shares its counter with a
 * busy one never reads 0, and a drain waiting for it would wait for the other
 * peer's traffic too. Here two peers are counted together only when both
 * their bucket and their tag agree (1 in 2^13 * 2^32 on 64-bit platforms):
 * counts may then be too high, never too low. A bucket whose slots all hold
 * other peers' requests (more than 8 peers of one bucket busy at once) counts
 * in flight_spilled, which is added to every peer's count: again too high,
 * never too low, so a drain waits rather than ends early.
 */
#define FERRYMAN_FLIGHT_BUCKETS  8192
#define FERRYMAN_FLIGHT_WAYS     8
#define FERRYMAN_FLIGHT_SHIFT    (sizeof(ngx_atomic_uint_t) * 4)
#define FERRYMAN_FLIGHT_COUNT    (((ngx_atomic_uint_t) 1 << FERRYMAN_FLIGHT_SHIFT) - 1)

/* ngx_http_ferryman_put() results, also read by ferryman.lua. */
#define FERRYMAN_OK              0
#define FERRYMAN_NO_ZONE         1
#define FERRYMAN_NO_MEMORY       2
#define FERRYMAN_BAD_KEY         3


typedef struct {
    ngx_str_node_t          sn;          /* str: the key, "H:host" or "E:backend" */
    ngx_str_t               value;
    uint32_t                slot;        /* E records: round-robin counter */
} ferryman_record_t;


typedef struct {
    ngx_str_node_t          sn;          /* str: the peer's name, as in $upstream_addr */
    ngx_msec_t              expires;
    ngx_uint_t              fails;
} ferryman_failure_t;


typedef struct {
    ngx_str_node_t          sn;          /* str: the peer's name */
    ngx_uint_t              requests;    /* in flight, for least_conn */
} ferryman_active_t;


typedef struct {
    /* First: the zone's memory is page-aligned, so each bucket is one cache
     * line. */
    ngx_atomic_t            flight[FERRYMAN_FLIGHT_BUCKETS]
                                  [FERRYMAN_FLIGHT_WAYS];
    ngx_atomic_t            flight_spilled;
    ngx_rbtree_t            records;
    ngx_rbtree_node_t       records_sentinel;
    ngx_rbtree_t            failures;
    ngx_rbtree_node_t       failures_sentinel;
    ngx_rbtree_t            active;
    ngx_rbtree_node_t       active_sentinel;
    ngx_atomic_t            generation;  /* moves on every commit */
    ngx_atomic_t            nfailures;   /* entries in failures: 0 skips the look-ups */
    ngx_msec_t              sweep_at;    /* next removal of expired failures */
    ngx_uint_t              next_slot;
    ngx_uint_t              nfree;
    uint32_t                free_slots[FERRYMAN_RR_SLOTS];
    ngx_atomic_t            rr[FERRYMAN_RR_SLOTS];
    /* [worker][0]: proxied here; [worker][1]: handed to the slow path */
    ngx_atomic_t            counts[FERRYMAN_COUNTER_SLOTS]
                                  [FERRYMAN_COUNTER_STRIDE];
    /* An X record (a Gateway listener's routes) was refused since the last
     * flush: the module's copy of them has a hole, through which a name
     * could reach a wider name's record, so every Gateway request goes to
     * the slow path until a full push (ngx_http_ferryman_gateway.c). */
    ngx_atomic_t            gateway_gaps;
} ferryman_shctx_t;


typedef struct {
    ngx_str_t               path;
    ngx_str_t               backend;
} ferryman_route_t;


typedef struct {
    ngx_str_node_t          sn;          /* str: the name looked up */
    unsigned                found:1;
    unsigned                redirect:1;
    unsigned                listeners:1; /* served on custom listeners only */
    ngx_str_t               listen_http;  /* their names ("-": none) */
    ngx_str_t               listen_https;
    ferryman_balance_t      balance;
    ngx_str_t               default_backend;
    ferryman_route_t       *exact;
    ngx_uint_t              nexact;
    ferryman_route_t       *prefix;
    ngx_uint_t              nprefix;
    ferryman_route_t       *root;        /* the Prefix "/" route */
    ferryman_vs_t          *vs;          /* a VirtualServer's routes (F) */
} ferryman_host_t;


typedef struct {
    struct sockaddr        *sockaddr;
    socklen_t               socklen;
    ngx_str_t               name;
    uint32_t                hash;        /* of name: the zone's peer trees' key */
    ngx_atomic_uint_t       flight_tag;  /* its tag in the in-flight slots */
} ferryman_peer_t;


typedef struct {
    ngx_str_node_t          sn;          /* str: the backend key */
    ferryman_peer_t        *peers;
    ngx_uint_t              npeers;
    uint32_t                slot;
} ferryman_backend_t;


/* One worker's decoded records for one generation of the zone. Requests in
 * flight keep theirs alive (refs) after a newer one replaced it. */
typedef struct {
    ngx_pool_t             *pool;
    ngx_atomic_uint_t       generation;
    ngx_uint_t              refs;
    ngx_uint_t              entries;
    size_t                  unknown_bytes;  /* names no record has, and their entries */
    ngx_rbtree_t            hosts;
    ngx_rbtree_node_t       hosts_sentinel;
    ngx_rbtree_t            backends;
    ngx_rbtree_node_t       backends_sentinel;
    /* The last look-ups: traffic repeats names, and this skips a hash and
     * a tree walk per request. */
    u_char                  last_name[256];
    size_t                  last_name_len;   /* 0: none */
    ferryman_host_t        *last_vhost;
    u_char                 *last_backend_name;  /* a route's string, by address */
    ferryman_backend_t     *last_backend;
} ferryman_cache_t;


typedef struct {
    ngx_str_t               slow_path;   /* ferryman_route's named location */
    /* ferryman_gateway_route: hosts by socket and name (X records) */
    ngx_flag_t              gateway;
} ferryman_loc_conf_t;


/* ferryman_h2c_detect (ngx_http_ferryman_h2c.c) */
typedef struct {
    ngx_flag_t              h2c_detect;
} ferryman_srv_conf_t;


typedef struct {
    ferryman_cache_t       *cache;
    ferryman_host_t        *host;
    ferryman_balance_t     *balance;
    ferryman_backend_t     *backend;
    ferryman_peer_t        *current;
    ngx_uint_t              counted;     /* current is in the active counts */
    ngx_atomic_t           *flight;      /* current's in-flight slot, NULL: none */
    uint64_t               *tried;
    uint64_t                tried_few;
    ngx_msec_t              delay;       /* a rate limit's, before proxying */
    ngx_uint_t              status;      /* after the delay: answer this, not proxy */
} ferryman_ctx_t;


extern ngx_module_t       ngx_http_ferryman_module;

/* What ferryman.lua calls through LuaJIT's FFI (ngx_http_ferryman_zone.c,
 * ngx_http_ferryman_flight.c, ngx_http_ferryman_verify.c): the module's only exported functions besides
 * the stream module's (ngx_ferryman_stream_api.h). */
int ngx_http_ferryman_put(const u_char *key, size_t key_len,
    const u_char *value, size_t value_len);
int ngx_http_ferryman_flush(void);
int ngx_http_ferryman_commit(void);
int ngx_http_ferryman_counts(uint64_t *proxied, uint64_t *handed_over);
int ngx_http_ferryman_in_flight(const u_char *peer, size_t len, u_char *name,
    size_t *name_len, uint64_t *count);
/* ngx_http_ferryman_verify.c: an upstream's certificate verified against a
 * CA set per request (egressMTLS verifyServer, externalAuth sslVerify), and
 * egressMTLS protocols and ciphers. */
int ngx_http_ferryman_upstream_verify(ngx_http_request_t *r, const u_char *key,
    size_t key_len, const u_char *pem, size_t pem_len, int depth, int flags,
    int protocols, const u_char *ciphers, size_t ciphers_len,
    const u_char *sans, size_t sans_len);
/* A Gateway listener's client certificate required (ngx_http_ferryman_verify.c). */
int ngx_http_ferryman_client_verify_required(void *ssl_conn);


/* The rest stays inside the .so: direct calls, not through its PLT, as when
 * it was one file of static functions. */
#pragma GCC visibility push(hidden)

/* The zone (ferryman_fast_zone), NULL: none in this configuration. */
extern ngx_shm_zone_t    *ferryman_zone;
/* $ferryman_listener's index (configs/http_listeners.py's map), NGX_ERROR when
 * the configuration defines no such variable: every request is then on the
 * default ports' listener, "". */
extern ngx_int_t          ferryman_listener_index;


static ngx_inline ferryman_shctx_t *
ferryman_shared(void)
{
    if (ferryman_zone == NULL) {
        return NULL;
    }

    return ferryman_zone->data;
}


static ngx_inline ngx_slab_pool_t *
ferryman_slab(void)
{
    return (ngx_slab_pool_t *) ferryman_zone->shm.addr;
}


/* ngx_http_ferryman_zone.c */
char *ngx_http_ferryman_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* A copy in pool of record key's value (len 0 when there is none) and its
 * round-robin slot; NGX_DECLINED: no zone. */
ngx_int_t ferryman_record_copy(ngx_str_t *key, ngx_pool_t *pool,
    ngx_str_t *value, uint32_t *slot);
/* One more request proxied here (which 0) or handed to the slow path (1). */
void ferryman_count(ferryman_shctx_t *sh, ngx_uint_t which);

/* ngx_http_ferryman_cache.c */
ferryman_cache_t *ferryman_current_cache(ferryman_shctx_t *sh);
/* Record kind:name as a host of the cache (H: an Ingress or VirtualServer
 * host, with its F record; X: a Gateway listener's, whose value is an F
 * record or "-"), NULL when there is none. */
ferryman_host_t *ferryman_cached_host(ferryman_cache_t *cache, u_char kind,
    ngx_str_t *name);
ngx_uint_t ferryman_possible_host(ngx_str_t *name);

/* ngx_http_ferryman_gateway.c: the Gateway server's routing
 * (ferryman_gateway_route): NGX_ERROR hands the request to the slow path. */
ngx_int_t ferryman_gateway_route(ngx_http_request_t *r, ferryman_shctx_t *sh);
void ferryman_release_cache(void *data);
ferryman_host_t *ferryman_vhost(ferryman_cache_t *cache, ngx_str_t *name);
ferryman_backend_t *ferryman_backend(ferryman_cache_t *cache,
    ngx_str_t *name);

/* ngx_http_ferryman_host.c */
ngx_int_t ferryman_parse_host(ngx_pool_t *pool, ferryman_host_t *host,
    ngx_str_t *text);
ngx_str_t *ferryman_match(ferryman_host_t *host, ngx_str_t *uri);
ngx_uint_t ferryman_wrong_listener(ngx_http_request_t *r,
    ferryman_host_t *host, ngx_uint_t https);

/* ngx_http_ferryman_route.c */
ngx_str_t *ferryman_request_name(ngx_http_request_t *r);
ngx_int_t ferryman_route(ngx_http_request_t *r, ferryman_shctx_t *sh,
    ngx_uint_t limit);
/* The rest of it once the host is found (cache's): NGX_OK, NGX_ERROR or a
 * status, as ferryman_route. */
ngx_int_t ferryman_route_host(ngx_http_request_t *r, ferryman_cache_t *cache,
    ferryman_host_t *host, ngx_uint_t limit);
ngx_int_t ngx_http_ferryman_route_handler(ngx_http_request_t *r);

/* ngx_http_ferryman_h2c.c: ferryman_h2c_detect, and the accept handler of
 * the sockets whose servers have it (set at init_module). */
char *ferryman_h2c_detect_directive(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
void *ngx_http_ferryman_create_srv_conf(ngx_conf_t *cf);
ngx_int_t ferryman_h2c_init_module(ngx_cycle_t *cycle);

/* ngx_http_ferryman_balancer.c */
ngx_int_t ferryman_init_upstream(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us);

/* ngx_http_ferryman_peers.c: the first four are called with the zone
 * locked. */
ngx_uint_t ferryman_is_down(ferryman_shctx_t *sh, ngx_slab_pool_t *shpool,
    ferryman_peer_t *peer, ngx_uint_t max_fails);
void ferryman_sweep(ferryman_shctx_t *sh, ngx_slab_pool_t *shpool);
ngx_uint_t ferryman_active_load(ferryman_shctx_t *sh, ferryman_peer_t *peer);
ngx_uint_t ferryman_active_add(ferryman_shctx_t *sh, ngx_slab_pool_t *shpool,
    ferryman_peer_t *peer, ngx_int_t delta);
void ferryman_active_done(ferryman_shctx_t *sh, ferryman_peer_t *peer);
void ferryman_count_failure(ferryman_peer_t *peer, ngx_msec_t fail_timeout);

/* ngx_http_ferryman_flight.c */
ngx_atomic_uint_t ferryman_flight_tag(u_char *name, size_t len);
ngx_atomic_t *ferryman_flight_enter(ferryman_shctx_t *sh, uint32_t hash,
    ngx_atomic_uint_t tag);


#pragma GCC visibility pop


#endif /* _NGX_HTTP_FERRYMAN_H_INCLUDED_ */
