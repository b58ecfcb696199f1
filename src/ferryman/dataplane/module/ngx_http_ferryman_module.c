/*
 * ngx_http_ferryman_module: ferryman's fast path, in C.
 *
 * Why C: with Debian's lua-nginx-module (stock LuaJIT), every *_by_lua entry
 * builds a fresh global environment and request context; measured here, that
 * fixed cost alone kept a Lua balancer at 0.91-0.95 of a hand-written NGINX
 * configuration's throughput. This module does the whole per-request work of
 * a proxied request without entering Lua: it finds the virtual host, matches
 * the path with Kubernetes' rules (or, for a VirtualServer host, with NGINX's
 * location precedence and NIC's matches and splits: ngx_http_ferryman_vs.c)
 * and picks the peer.
 *
 * Data: the Lua push handler (dataplane/lua/ferryman.lua) hands every virtual
 * host (H), endpoint set (E) and VirtualServer route (F) record to
 * ngx_http_ferryman_put() through LuaJIT's FFI (NGINX loads modules with
 * RTLD_GLOBAL, so ffi.C finds the symbols) and calls
 * ngx_http_ferryman_commit() once a push is complete.
 * Records live in the shared zone "ferryman_fast" as the text ferryman sent
 * (grammar: configs/routes.py, dataplane/lua/ferryman.lua). Each worker
 * decodes what its requests need into a cache it drops when the zone's
 * generation moves, so a committed push is in force from every worker's next
 * request on, exactly as with the Lua router.
 *
 * Routing runs in the precontent phase of the location marked
 * `ferryman_route @ferryman`: requests this module does not proxy (no virtual
 * host, no route, no ready endpoint, plain HTTP on a redirecting host) go to
 * that named location, the Lua slow path, which answers them; the others go
 * on to proxy_pass, whose upstream (`ferryman_fast`) picks the peer.
 *
 * Balancing: round-robin over a counter every worker shares (per backend, in
 * the zone), or least_conn (the fewest requests in flight, counted per peer in
 * the zone, ties broken in round-robin order); passive health with NGINX's
 * max_fails/fail_timeout semantics (failures are counted per peer in the zone,
 * so all workers agree); a failed attempt moves on to a peer this request has
 * not tried.
 *
 * In flight: every attempt the fast path sends to a peer is counted from the
 * balancer's get to its free, per peer, over all workers (a table of atomic
 * slots in the zone, see FERRYMAN_FLIGHT_BUCKETS), and exported to ferryman.lua
 * (ngx_http_ferryman_in_flight), so that "no request to this peer is left" is
 * a measurement ferryman can wait for before a machine goes away.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_vs.h"
#include "ngx_ferryman_stream_api.h"


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
} ferryman_loc_conf_t;


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


static char *ngx_http_ferryman_zone(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_ferryman_fast(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_ferryman_preconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_http_ferryman_postconfiguration(ngx_conf_t *cf);
static void *ngx_http_ferryman_create_loc_conf(ngx_conf_t *cf);
static ngx_atomic_uint_t ferryman_flight_tag(u_char *name, size_t len);
static uint64_t ferryman_flight_count(ferryman_shctx_t *sh, uint32_t hash,
    ngx_atomic_uint_t tag);
static ngx_int_t ferryman_peer_address(u_char *text, size_t len,
    ngx_sockaddr_t *sa, socklen_t *socklen);
static char *ngx_http_ferryman_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);

int ngx_http_ferryman_put(const u_char *key, size_t key_len,
    const u_char *value, size_t value_len);
int ngx_http_ferryman_flush(void);
int ngx_http_ferryman_commit(void);
int ngx_http_ferryman_counts(uint64_t *proxied, uint64_t *handed_over);
int ngx_http_ferryman_in_flight(const u_char *peer, size_t len, u_char *name,
    size_t *name_len, uint64_t *count);


static ngx_shm_zone_t    *ferryman_zone;
static ferryman_cache_t  *ferryman_cache;
/* $ferryman_listener's index (configs/http_listeners.py's map), NGX_ERROR when
 * the configuration defines no such variable: every request is then on the
 * default ports' listener, "". */
static ngx_int_t          ferryman_listener_index = NGX_ERROR;


static ngx_command_t  ngx_http_ferryman_commands[] = {

    { ngx_string("ferryman_fast_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_ferryman_zone,
      0,
      0,
      NULL },

    { ngx_string("ferryman_fast"),
      NGX_HTTP_UPS_CONF|NGX_CONF_NOARGS,
      ngx_http_ferryman_fast,
      0,
      0,
      NULL },

    /* ferryman_route @named_location: route in the precontent phase, hand
     * what the fast path does not proxy to that location. */
    { ngx_string("ferryman_route"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ferryman_loc_conf_t, slow_path),
      NULL },

    /* The rate limits' zone (ngx_http_ferryman_limit.c): optional. */
    { ngx_string("ferryman_limit_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ferryman_limit_zone_directive,
      0,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_ferryman_module_ctx = {
    ngx_http_ferryman_preconfiguration,    /* preconfiguration */
    ngx_http_ferryman_postconfiguration,   /* postconfiguration */
    NULL,                                  /* create main configuration */
    NULL,                                  /* init main configuration */
    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */
    ngx_http_ferryman_create_loc_conf,     /* create location configuration */
    ngx_http_ferryman_merge_loc_conf       /* merge location configuration */
};


ngx_module_t  ngx_http_ferryman_module = {
    NGX_MODULE_V1,
    &ngx_http_ferryman_module_ctx,         /* module context */
    ngx_http_ferryman_commands,            /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    NULL,                                  /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    NULL,                                  /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ferryman_shctx_t *
ferryman_shared(void)
{
    if (ferryman_zone == NULL) {
        return NULL;
    }

    return ferryman_zone->data;
}


static ngx_slab_pool_t *
ferryman_slab(void)
{
    return (ngx_slab_pool_t *) ferryman_zone->shm.addr;
}


/* Records: the write side, called by ferryman.lua's push handler. */

static ferryman_record_t *
ferryman_find_record(ferryman_shctx_t *sh, ngx_str_t *key, uint32_t hash)
{
    return (ferryman_record_t *) ngx_str_rbtree_lookup(&sh->records, key,
                                                       hash);
}


static uint32_t
ferryman_take_slot(ferryman_shctx_t *sh, uint32_t hash)
{
    if (sh->nfree > 0) {
        return sh->free_slots[--sh->nfree];
    }

    if (sh->next_slot < FERRYMAN_RR_SLOTS) {
        return (uint32_t) sh->next_slot++;
    }

    /* More backends than counters: some share one; still valid memory. */
    return (hash % FERRYMAN_RR_SLOTS) | FERRYMAN_SLOT_SHARED;
}


static void
ferryman_give_slot(ferryman_shctx_t *sh, uint32_t slot)
{
    if (!(slot & FERRYMAN_SLOT_SHARED) && sh->nfree < FERRYMAN_RR_SLOTS) {
        sh->free_slots[sh->nfree++] = slot;
    }
}


static void
ferryman_remove_record(ferryman_shctx_t *sh, ngx_slab_pool_t *shpool,
    ferryman_record_t *rec)
{
    if (rec->sn.str.data[0] == 'E') {
        ferryman_give_slot(sh, rec->slot);
    }

    ngx_rbtree_delete(&sh->records, &rec->sn.node);
    ngx_slab_free_locked(shpool, rec);
}


int
ngx_http_ferryman_put(const u_char *key, size_t key_len, const u_char *value,
    size_t value_len)
{
    int                 rc;
    u_char             *p;
    uint32_t            hash;
    ngx_str_t           name;
    ngx_slab_pool_t    *shpool;
    ferryman_shctx_t   *sh;
    ferryman_record_t  *old, *rec;

    sh = ferryman_shared();
    if (sh == NULL) {
        return FERRYMAN_NO_ZONE;
    }

    if (key_len < 3 || key_len > FERRYMAN_MAX_KEY || key[1] != ':') {
        return FERRYMAN_BAD_KEY;
    }

    if (key[0] != 'H' && key[0] != 'E' && key[0] != 'F' && key[0] != 'S'
        && key[0] != 'T')
    {
        /* Only virtual hosts, endpoint sets, VirtualServer routes and
         * TransportServers' listeners and certificates
         * (ngx_stream_ferryman_module) are read here. */
        return FERRYMAN_OK;
    }

    name.data = (u_char *) key;
    name.len = key_len;
    hash = ngx_crc32_short(name.data, name.len);

    shpool = ferryman_slab();
    rc = FERRYMAN_OK;

    ngx_shmtx_lock(&shpool->mutex);

    old = ferryman_find_record(sh, &name, hash);

    if (value_len == 0) {
        if (old != NULL) {
            ferryman_remove_record(sh, shpool, old);
        }
        goto done;
    }

    if (old != NULL && old->value.len == value_len
        && ngx_memcmp(old->value.data, value, value_len) == 0)
    {
        goto done;
    }

    rec = ngx_slab_alloc_locked(shpool,
                                sizeof(ferryman_record_t) + key_len + value_len);
    if (rec == NULL) {
        rc = FERRYMAN_NO_MEMORY;
        goto done;
    }

    p = (u_char *) rec + sizeof(ferryman_record_t);
    rec->sn.str.data = p;
    rec->sn.str.len = key_len;
    p = ngx_cpymem(p, key, key_len);
    rec->value.data = p;
    rec->value.len = value_len;
    ngx_memcpy(p, value, value_len);
    rec->sn.node.key = hash;
    rec->slot = 0;

    if (old != NULL) {
        /* Same backend: keep its counter, so round-robin goes on evenly. */
        rec->slot = old->slot;
        ngx_rbtree_delete(&sh->records, &old->sn.node);
        ngx_slab_free_locked(shpool, old);

    } else if (key[0] == 'E') {
        rec->slot = ferryman_take_slot(sh, hash);
    }

    ngx_rbtree_insert(&sh->records, &rec->sn.node);

done:

    ngx_shmtx_unlock(&shpool->mutex);

    return rc;
}


int
ngx_http_ferryman_flush(void)
{
    ngx_slab_pool_t    *shpool;
    ngx_rbtree_node_t  *node;
    ferryman_shctx_t   *sh;

    sh = ferryman_shared();
    if (sh == NULL) {
        return FERRYMAN_NO_ZONE;
    }

    shpool = ferryman_slab();

    ngx_shmtx_lock(&shpool->mutex);

    while (sh->records.root != sh->records.sentinel) {
        node = ngx_rbtree_min(sh->records.root, sh->records.sentinel);
        ngx_rbtree_delete(&sh->records, node);
        ngx_slab_free_locked(shpool, node);
    }

    sh->next_slot = 0;
    sh->nfree = 0;

    ngx_shmtx_unlock(&shpool->mutex);

    return FERRYMAN_OK;
}


int
ngx_http_ferryman_commit(void)
{
    ferryman_shctx_t  *sh;

    sh = ferryman_shared();
    if (sh == NULL) {
        return FERRYMAN_NO_ZONE;
    }

    (void) ngx_atomic_fetch_add(&sh->generation, 1);

    return FERRYMAN_OK;
}


/* Requests proxied by the fast path and handed to the slow path, over all
 * workers since the zone was created (ferryman_fast_path_requests_total). */
int
ngx_http_ferryman_counts(uint64_t *proxied, uint64_t *handed_over)
{
    ngx_uint_t         i;
    ferryman_shctx_t  *sh;

    sh = ferryman_shared();
    if (sh == NULL) {
        return FERRYMAN_NO_ZONE;
    }

    *proxied = 0;
    *handed_over = 0;

    for (i = 0; i < FERRYMAN_COUNTER_SLOTS; i++) {
        *proxied += sh->counts[i][0];
        *handed_over += sh->counts[i][1];
    }

    return FERRYMAN_OK;
}


/* Requests in flight to a peer now, over all workers: the fast path's
 * attempts at it whose free has not come yet. peer: "<addr>#<port>" as in
 * endpoint records; its name as $upstream_addr writes it goes to name
 * (NGX_SOCKADDR_STRLEN bytes), the name's length to *name_len. */
int
ngx_http_ferryman_in_flight(const u_char *peer, size_t len, u_char *name,
    size_t *name_len, uint64_t *count)
{
    socklen_t          socklen;
    ngx_sockaddr_t     sa;
    ferryman_shctx_t  *sh;

    sh = ferryman_shared();
    if (sh == NULL) {
        return FERRYMAN_NO_ZONE;
    }

    if (ferryman_peer_address((u_char *) peer, len, &sa, &socklen) != NGX_OK) {
        return FERRYMAN_BAD_KEY;
    }

    *name_len = ngx_sock_ntop(&sa.sockaddr, socklen, name, NGX_SOCKADDR_STRLEN,
                              1);
    *count = ferryman_flight_count(sh, ngx_crc32_short(name, *name_len),
                                   ferryman_flight_tag(name, *name_len));

    return FERRYMAN_OK;
}


static void
ferryman_count(ferryman_shctx_t *sh, ngx_uint_t which)
{
    /* Old workers of a reload may share a slot with new ones: atomic. */
    (void) ngx_atomic_fetch_add(
                     &sh->counts[ngx_worker % FERRYMAN_COUNTER_SLOTS][which], 1);
}


/* The worker's cache: decoding records. */

static ngx_int_t
ferryman_field(u_char **pos, u_char *end, ngx_str_t *field)
{
    u_char  *p;

    p = *pos;

    while (p < end && *p == ' ') {
        p++;
    }

    if (p == end) {
        return NGX_DONE;
    }

    field->data = p;

    while (p < end && *p != ' ') {
        p++;
    }

    field->len = p - field->data;
    *pos = p;

    return NGX_OK;
}


/* An upper bound of ferryman_field()'s results: one more than the spaces. */
static ngx_uint_t
ferryman_count_fields(ngx_str_t *text)
{
    ngx_uint_t  i, n;

    n = 1;
    for (i = 0; i < text->len; i++) {
        if (text->data[i] == ' ') {
            n++;
        }
    }

    return n;
}


/* "<rr|lc>:<max_fails>:<fail_timeout seconds>"; anything else keeps the
 * defaults (round-robin, 1, 10 s), as ferryman.lua does. */
static void
ferryman_parse_balancing(ferryman_host_t *host, ngx_str_t *field)
{
    u_char     *p, *end, *colon;
    ngx_int_t   max_fails, timeout;

    host->balance.least_conn = 0;
    host->balance.max_fails = 1;
    host->balance.fail_timeout = 10000;

    p = field->data;
    end = p + field->len;

    colon = ngx_strlchr(p, end, ':');
    if (colon == NULL || colon == p) {
        return;
    }

    p = colon + 1;
    colon = ngx_strlchr(p, end, ':');
    if (colon == NULL) {
        return;
    }

    max_fails = ngx_atoi(p, colon - p);
    timeout = ngx_atofp(colon + 1, end - colon - 1, 3);
    if (max_fails == NGX_ERROR || timeout == NGX_ERROR) {
        return;
    }

    host->balance.least_conn = (field->data[0] == 'l' && field->data[1] == 'c');
    host->balance.max_fails = max_fails;
    host->balance.fail_timeout = timeout;
}


/* "E|<path>|<backend>" or "P|<path>|<backend>". */
static ngx_int_t
ferryman_parse_route(ngx_str_t *field, ferryman_route_t *route)
{
    u_char  *p, *end, *bar;

    if (field->len < 5 || field->data[1] != '|') {
        return NGX_DECLINED;
    }

    p = field->data + 2;
    end = field->data + field->len;

    bar = ngx_strlchr(p, end, '|');
    if (bar == NULL || bar == p || bar + 1 == end) {
        return NGX_DECLINED;
    }

    route->path.data = p;
    route->path.len = bar - p;
    route->backend.data = bar + 1;
    route->backend.len = end - bar - 1;

    return NGX_OK;
}


/* Routes ordered by path length, then bytes; equal paths keep the record's
 * order (each path's data lies in the record, in order), so the first one
 * wins as in ferryman.lua and configs/routes.py. */
static int ngx_libc_cdecl
ferryman_route_cmp(const void *one, const void *two)
{
    const ferryman_route_t  *a = one, *b = two;

    int  rc;

    if (a->path.len != b->path.len) {
        return a->path.len < b->path.len ? -1 : 1;
    }

    rc = ngx_memcmp(a->path.data, b->path.data, a->path.len);
    if (rc != 0) {
        return rc;
    }

    return (a->path.data > b->path.data) - (a->path.data < b->path.data);
}


/* The first route (in record order) whose path is data[0..len). */
static ferryman_route_t *
ferryman_find_route(ferryman_route_t *routes, ngx_uint_t n, u_char *data,
    size_t len)
{
    int                rc;
    ngx_uint_t         lo, hi, mid;
    ferryman_route_t  *r;

    lo = 0;
    hi = n;

    /* The lowest index whose path is not below the key. */
    while (lo < hi) {
        mid = lo + (hi - lo) / 2;
        r = &routes[mid];

        if (r->path.len != len) {
            rc = r->path.len < len ? -1 : 1;

        } else {
            rc = ngx_memcmp(r->path.data, data, len);
        }

        if (rc < 0) {
            lo = mid + 1;

        } else {
            hi = mid;
        }
    }

    if (lo < n && routes[lo].path.len == len
        && ngx_memcmp(routes[lo].path.data, data, len) == 0)
    {
        return &routes[lo];
    }

    return NULL;
}


/* The redirect field's listener suffix, "<0|1>:<http>:<https>" (configs/
 * routes.py): the host is served on those GlobalConfiguration listeners only.
 * A malformed suffix serves it nowhere ("-" never names a listener). */
static void
ferryman_parse_listeners(ferryman_host_t *host, ngx_str_t *field)
{
    u_char  *start, *end, *colon;

    host->listeners = 1;
    ngx_str_set(&host->listen_http, "-");
    ngx_str_set(&host->listen_https, "-");

    if (field->len < 5 || field->data[1] != ':') {
        return;
    }

    start = field->data + 2;
    end = field->data + field->len;
    colon = ngx_strlchr(start, end, ':');

    if (colon == NULL || colon == start || colon + 1 == end) {
        return;
    }

    host->listen_http.data = start;
    host->listen_http.len = colon - start;
    host->listen_https.data = colon + 1;
    host->listen_https.len = end - colon - 1;
}


/* Whether listener (data, len) is one of "want"'s comma-separated names
 * (configs/routes.py: an Ingress's nginx.org/listen-ports give several, named
 * by port; "0" stands for the default ports, whose listener is ""). */
static ngx_uint_t
ferryman_listed(ngx_str_t *want, u_char *data, size_t len)
{
    u_char  *pos, *end, *comma;
    size_t   n;

    pos = want->data;
    end = pos + want->len;

    while (pos < end) {
        comma = ngx_strlchr(pos, end, ',');
        if (comma == NULL) {
            comma = end;
        }

        n = comma - pos;

        if (n == 1 && pos[0] == '0') {
            if (len == 0) {
                return 1;
            }

        } else if (n == len && ngx_memcmp(pos, data, len) == 0) {
            return 1;
        }

        pos = comma + 1;
    }

    return 0;
}


/* Whether the request came in on a listener the host is not served on. */
static ngx_uint_t
ferryman_wrong_listener(ngx_http_request_t *r, ferryman_host_t *host,
    ngx_uint_t https)
{
    size_t                      len;
    u_char                     *data;
    ngx_str_t                  *want;
    ngx_http_variable_value_t  *vv;

    len = 0;
    data = NULL;

    if (ferryman_listener_index != NGX_ERROR) {
        vv = ngx_http_get_indexed_variable(r, ferryman_listener_index);
        if (vv != NULL && !vv->not_found) {
            len = vv->len;
            data = vv->data;
        }
    }

    if (!host->listeners) {
        return len != 0;
    }

    want = https ? &host->listen_https : &host->listen_http;

    return !ferryman_listed(want, data, len);
}


/* "<tls> <redirect> <default> <balancing> <route> ..." (configs/routes.py). */
static ngx_int_t
ferryman_parse_host(ngx_pool_t *pool, ferryman_host_t *host, ngx_str_t *text)
{
    u_char            *pos, *end;
    ngx_str_t          field;
    ngx_uint_t         n, fields;
    ferryman_route_t   route;

    pos = text->data;
    end = pos + text->len;
    fields = ferryman_count_fields(text);

    host->exact = ngx_palloc(pool, fields * sizeof(ferryman_route_t));
    host->prefix = ngx_palloc(pool, fields * sizeof(ferryman_route_t));
    if (host->exact == NULL || host->prefix == NULL) {
        return NGX_ERROR;
    }

    for (n = 0; ferryman_field(&pos, end, &field) == NGX_OK; n++) {

        switch (n) {

        case 0:  /* tls: the certificate phase's business */
            break;

        case 1:
            host->redirect = (field.len >= 1 && field.data[0] == '1');
            if (field.len > 1) {
                ferryman_parse_listeners(host, &field);
            }
            break;

        case 2:
            if (!(field.len == 1 && field.data[0] == '-')) {
                host->default_backend = field;
            }
            break;

        case 3:
            ferryman_parse_balancing(host, &field);
            break;

        default:
            if (ferryman_parse_route(&field, &route) != NGX_OK) {
                break;
            }

            if (field.data[0] == 'E') {
                host->exact[host->nexact++] = route;

            } else if (field.data[0] == 'P') {
                host->prefix[host->nprefix++] = route;
            }
        }
    }

    if (n < 4) {
        return NGX_DECLINED;
    }

    /* Sorted, so a path is found in log time whatever the number of routes
     * (ferryman.lua hashes them instead). */
    ngx_qsort(host->exact, host->nexact, sizeof(ferryman_route_t),
              ferryman_route_cmp);
    ngx_qsort(host->prefix, host->nprefix, sizeof(ferryman_route_t),
              ferryman_route_cmp);

    host->root = ferryman_find_route(host->prefix, host->nprefix,
                                     (u_char *) "/", 1);

    return NGX_OK;
}


/* A peer's tag in its in-flight bucket: a hash independent of the CRC that
 * chose the bucket, in the slot word's upper half. */
static ngx_atomic_uint_t
ferryman_flight_tag(u_char *name, size_t len)
{
    return ((ngx_atomic_uint_t) ngx_murmur_hash2(name, len)
            & FERRYMAN_FLIGHT_COUNT) << FERRYMAN_FLIGHT_SHIFT;
}


/* Counts one attempt at a peer; returns the slot its free must uncount. */
static ngx_atomic_t *
ferryman_flight_enter(ferryman_shctx_t *sh, uint32_t hash,
    ngx_atomic_uint_t tag)
{
    ngx_uint_t          i, free;
    ngx_atomic_t       *bucket;
    ngx_atomic_uint_t   word;

    bucket = sh->flight[hash % FERRYMAN_FLIGHT_BUCKETS];

    for ( ;; ) {
        free = FERRYMAN_FLIGHT_WAYS;

        for (i = 0; i < FERRYMAN_FLIGHT_WAYS; i++) {
            word = bucket[i];

            if ((word & ~FERRYMAN_FLIGHT_COUNT) == tag
                && (word & FERRYMAN_FLIGHT_COUNT) != FERRYMAN_FLIGHT_COUNT)
            {
                if (ngx_atomic_cmp_set(&bucket[i], word, word + 1)) {
                    return &bucket[i];
                }

                break;  /* another worker moved it: look again */
            }

            if ((word & FERRYMAN_FLIGHT_COUNT) == 0
                && free == FERRYMAN_FLIGHT_WAYS)
            {
                free = i;
            }
        }

        if (i < FERRYMAN_FLIGHT_WAYS) {
            continue;
        }

        if (free == FERRYMAN_FLIGHT_WAYS) {
            (void) ngx_atomic_fetch_add(&sh->flight_spilled, 1);
            return &sh->flight_spilled;
        }

        word = bucket[free];

        if ((word & FERRYMAN_FLIGHT_COUNT) == 0
            && ngx_atomic_cmp_set(&bucket[free], word, tag | 1))
        {
            return &bucket[free];
        }
    }
}


/* Requests in flight to a peer now: its slots, plus the spilled ones. A
 * request counted during the whole reading is in it: its slot does not move. */
static uint64_t
ferryman_flight_count(ferryman_shctx_t *sh, uint32_t hash,
    ngx_atomic_uint_t tag)
{
    uint64_t            count;
    ngx_uint_t          i;
    ngx_atomic_t       *bucket;
    ngx_atomic_uint_t   word;

    bucket = sh->flight[hash % FERRYMAN_FLIGHT_BUCKETS];
    count = sh->flight_spilled;

    for (i = 0; i < FERRYMAN_FLIGHT_WAYS; i++) {
        word = bucket[i];

        if ((word & ~FERRYMAN_FLIGHT_COUNT) == tag) {
            count += word & FERRYMAN_FLIGHT_COUNT;
        }
    }

    return count;
}


/* "<addr>#<port>" (an endpoint record's peer, the IPv6 address unbracketed)
 * as a socket address, read as ferryman_parse_peers() reads it. */
static ngx_int_t
ferryman_peer_address(u_char *text, size_t len, ngx_sockaddr_t *sa,
    socklen_t *socklen)
{
    u_char           *hash;
    size_t            n;
    in_addr_t         inaddr;
    ngx_int_t         port;
#if (NGX_HAVE_INET6)
    struct in6_addr   inaddr6;
#endif

    hash = NULL;
    for (n = len; n > 0; n--) {
        if (text[n - 1] == '#') {
            hash = text + n - 1;
            break;
        }
    }

    if (hash == NULL) {
        return NGX_DECLINED;
    }

    port = ngx_atoi(hash + 1, text + len - hash - 1);
    if (port < 1 || port > 65535) {
        return NGX_DECLINED;
    }

    ngx_memzero(sa, sizeof(ngx_sockaddr_t));

    inaddr = ngx_inet_addr(text, hash - text);

    if (inaddr != INADDR_NONE) {
        sa->sockaddr_in.sin_family = AF_INET;
        sa->sockaddr_in.sin_addr.s_addr = inaddr;
        *socklen = sizeof(struct sockaddr_in);

#if (NGX_HAVE_INET6)
    } else if (ngx_inet6_addr(text, hash - text, inaddr6.s6_addr) == NGX_OK) {
        sa->sockaddr_in6.sin6_family = AF_INET6;
        sa->sockaddr_in6.sin6_addr = inaddr6;
        *socklen = sizeof(struct sockaddr_in6);
#endif

    } else {
        return NGX_DECLINED;
    }

    ngx_inet_set_port(&sa->sockaddr, (in_port_t) port);

    return NGX_OK;
}


/* "<addr>#<port> ..." with IPv6 addresses unbracketed. */
static ngx_int_t
ferryman_parse_peers(ngx_pool_t *pool, ferryman_backend_t *backend,
    ngx_str_t *text)
{
    u_char           *pos, *end, *hash, *name;
    ngx_int_t         port;
    ngx_str_t         field;
    ngx_uint_t        n;
    ngx_addr_t        addr;
    ferryman_peer_t  *peer;

    backend->peers = ngx_palloc(pool, ferryman_count_fields(text)
                                      * sizeof(ferryman_peer_t));
    if (backend->peers == NULL) {
        return NGX_ERROR;
    }

    pos = text->data;
    end = pos + text->len;

    while (ferryman_field(&pos, end, &field) == NGX_OK) {

        hash = NULL;
        for (n = field.len; n > 0; n--) {
            if (field.data[n - 1] == '#') {
                hash = field.data + n - 1;
                break;
            }
        }

        if (hash == NULL) {
            continue;
        }

        port = ngx_atoi(hash + 1, field.data + field.len - hash - 1);
        if (port < 1 || port > 65535) {
            continue;
        }

        if (ngx_parse_addr(pool, &addr, field.data, hash - field.data)
            != NGX_OK)
        {
            continue;
        }

        ngx_inet_set_port(addr.sockaddr, (in_port_t) port);

        name = ngx_pnalloc(pool, NGX_SOCKADDR_STRLEN);
        if (name == NULL) {
            return NGX_ERROR;
        }

        peer = &backend->peers[backend->npeers++];
        peer->sockaddr = addr.sockaddr;
        peer->socklen = addr.socklen;
        peer->name.data = name;
        peer->name.len = ngx_sock_ntop(addr.sockaddr, addr.socklen, name,
                                       NGX_SOCKADDR_STRLEN, 1);
        peer->hash = ngx_crc32_short(name, peer->name.len);
        peer->flight_tag = ferryman_flight_tag(name, peer->name.len);
    }

    return NGX_OK;
}


/* A copy of the value of record kind:name (len 0 when there is none) and, for
 * an endpoint set, its round-robin counter. */
static ngx_int_t
ferryman_fetch(ferryman_cache_t *cache, u_char kind, ngx_str_t *name,
    ngx_str_t *value, uint32_t *slot)
{
    u_char              buf[FERRYMAN_MAX_KEY];
    ngx_str_t           key;
    ngx_int_t           rc;
    ngx_slab_pool_t    *shpool;
    ferryman_shctx_t   *sh;
    ferryman_record_t  *rec;

    value->len = 0;
    value->data = NULL;
    *slot = 0;

    if (name->len + 2 > FERRYMAN_MAX_KEY) {
        return NGX_OK;
    }

    buf[0] = kind;
    buf[1] = ':';
    ngx_memcpy(buf + 2, name->data, name->len);
    key.data = buf;
    key.len = name->len + 2;

    sh = ferryman_shared();
    shpool = ferryman_slab();
    rc = NGX_OK;

    ngx_shmtx_lock(&shpool->mutex);

    rec = ferryman_find_record(sh, &key, ngx_crc32_short(key.data, key.len));

    if (rec != NULL) {
        value->data = ngx_pnalloc(cache->pool, rec->value.len);

        if (value->data == NULL) {
            rc = NGX_ERROR;

        } else {
            ngx_memcpy(value->data, rec->value.data, rec->value.len);
            value->len = rec->value.len;
            /* An index into a fixed array: always valid memory, even after
             * the record is gone (a stale one can at worst share a counter). */
            *slot = rec->slot & ~FERRYMAN_SLOT_SHARED;
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    return rc;
}


/* A zeroed cache entry of the given size, named: hosts and backends both
 * start with their ngx_str_node_t. */
static void *
ferryman_cache_node(ferryman_cache_t *cache, ngx_str_t *name, uint32_t hash,
    size_t size)
{
    ngx_str_node_t  *sn;

    sn = ngx_pcalloc(cache->pool, size);
    if (sn == NULL) {
        return NULL;
    }

    sn->str.data = ngx_pstrdup(cache->pool, name);
    if (sn->str.data == NULL) {
        return NULL;
    }

    sn->str.len = name->len;
    sn->node.key = hash;

    return sn;
}


static ferryman_host_t *
ferryman_host(ferryman_cache_t *cache, ngx_str_t *name)
{
    uint32_t          hash, slot;
    ngx_str_t         value;
    ferryman_host_t  *host;

    hash = ngx_crc32_short(name->data, name->len);

    host = (ferryman_host_t *) ngx_str_rbtree_lookup(&cache->hosts, name, hash);

    if (host == NULL) {
        if (ferryman_fetch(cache, 'H', name, &value, &slot) != NGX_OK) {
            return NULL;
        }

        host = ferryman_cache_node(cache, name, hash,
                                   sizeof(ferryman_host_t));
        if (host == NULL) {
            return NULL;
        }

        if (value.len > 0
            && ferryman_parse_host(cache->pool, host, &value) == NGX_OK)
        {
            host->found = 1;

            /* A VirtualServer's routes; without them (none, or malformed)
             * its stub has no route and the slow path serves the host. */
            if (ferryman_fetch(cache, 'F', name, &value, &slot) != NGX_OK) {
                return NULL;
            }

            if (value.len > 0) {
                host->vs = ferryman_vs_parse(cache->pool, ngx_cycle->log,
                                             &value);
            }

        } else {
            cache->unknown_bytes += sizeof(ferryman_host_t) + name->len;
        }

        ngx_rbtree_insert(&cache->hosts, &host->sn.node);
        cache->entries++;
    }

    return host->found ? host : NULL;
}


/* Whether a name could be a virtual host's (a validated DNS name; $host is
 * lowercased): only those are looked up and cached, any other reaches the
 * catch-all at once, so clients cannot fill the cache with them. */
static ngx_uint_t
ferryman_possible_host(ngx_str_t *name)
{
    u_char  c, *p, *end;

    if (name->len == 0 || name->len > FERRYMAN_MAX_HOST_NAME) {
        return 0;
    }

    end = name->data + name->len;

    for (p = name->data; p < end; p++) {
        c = *p;

        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
              || c == '-' || c == '.'))
        {
            return 0;
        }
    }

    return 1;
}


/* The virtual host serving a name: exact, then the wildcard covering exactly
 * one more label, then the catch-all "_". */
static ferryman_host_t *
ferryman_vhost_lookup(ferryman_cache_t *cache, ngx_str_t *name)
{
    u_char            buf[FERRYMAN_MAX_KEY], *dot, *end;
    ngx_str_t         wildcard;
    ferryman_host_t  *host;

    static ngx_str_t  catch_all = ngx_string("_");

    if (!ferryman_possible_host(name)) {
        return ferryman_host(cache, &catch_all);
    }

    host = ferryman_host(cache, name);
    if (host != NULL) {
        return host;
    }

    end = name->data + name->len;
    dot = ngx_strlchr(name->data, end, '.');

    if (dot != NULL && dot != name->data && dot + 1 < end
        && (size_t) (end - dot) + 1 <= FERRYMAN_MAX_KEY)
    {
        buf[0] = '*';
        ngx_memcpy(buf + 1, dot, end - dot);
        wildcard.data = buf;
        wildcard.len = end - dot + 1;

        host = ferryman_host(cache, &wildcard);
        if (host != NULL) {
            return host;
        }
    }

    return ferryman_host(cache, &catch_all);
}


static ferryman_host_t *
ferryman_vhost(ferryman_cache_t *cache, ngx_str_t *name)
{
    ferryman_host_t  *host;

    if (cache->last_name_len == name->len && name->len > 0
        && ngx_memcmp(cache->last_name, name->data, name->len) == 0)
    {
        return cache->last_vhost;
    }

    host = ferryman_vhost_lookup(cache, name);

    if (name->len <= sizeof(cache->last_name)) {
        ngx_memcpy(cache->last_name, name->data, name->len);
        cache->last_name_len = name->len;
        cache->last_vhost = host;
    }

    return host;
}


/* configs/routes.py::match: Exact on the path as it is; then the longest
 * Prefix that equals the path without its trailing slashes, or a part of it
 * that ends just before a "/"; then "/", then the default backend. */
static ngx_str_t *
ferryman_match(ferryman_host_t *host, ngx_str_t *uri)
{
    size_t             len;
    ferryman_route_t  *r;

    r = ferryman_find_route(host->exact, host->nexact, uri->data, uri->len);
    if (r != NULL) {
        return &r->backend;
    }

    len = uri->len;
    while (len > 0 && uri->data[len - 1] == '/') {
        len--;
    }

    /* The path without its trailing slashes, then each part of it that ends
     * just before a "/", longest first: one look-up per path element. */
    while (len > 0) {
        r = ferryman_find_route(host->prefix, host->nprefix, uri->data, len);
        if (r != NULL) {
            return &r->backend;
        }

        do {
            len--;
        } while (len > 0 && uri->data[len] != '/');
    }

    if (host->root != NULL) {
        return &host->root->backend;
    }

    return host->default_backend.len ? &host->default_backend : NULL;
}


static ferryman_backend_t *
ferryman_backend(ferryman_cache_t *cache, ngx_str_t *name)
{
    uint32_t             hash;
    ngx_str_t            value;
    ferryman_backend_t  *backend;

    hash = ngx_crc32_short(name->data, name->len);

    backend = (ferryman_backend_t *) ngx_str_rbtree_lookup(&cache->backends,
                                                           name, hash);
    if (backend != NULL) {
        return backend;
    }

    backend = ferryman_cache_node(cache, name, hash,
                                  sizeof(ferryman_backend_t));
    if (backend == NULL) {
        return NULL;
    }

    if (ferryman_fetch(cache, 'E', name, &value, &backend->slot) != NGX_OK) {
        return NULL;
    }

    if (value.len > 0
        && ferryman_parse_peers(cache->pool, backend, &value) != NGX_OK)
    {
        return NULL;
    }

    ngx_rbtree_insert(&cache->backends, &backend->sn.node);
    cache->entries++;

    return backend;
}


static ferryman_cache_t *
ferryman_current_cache(ferryman_shctx_t *sh)
{
    ngx_pool_t         *pool;
    ngx_atomic_uint_t   generation;
    ferryman_cache_t   *cache;

    generation = sh->generation;
    cache = ferryman_cache;

    if (cache != NULL && cache->generation == generation
        && cache->entries < FERRYMAN_MAX_ENTRIES
        && cache->unknown_bytes < FERRYMAN_MAX_UNKNOWN_BYTES)
    {
        return cache;
    }

    ferryman_cache = NULL;

    if (cache != NULL && cache->refs == 0) {
        ngx_destroy_pool(cache->pool);
    }

    /* The cycle's log: a request's log dies with its connection. */
    pool = ngx_create_pool(16384, ngx_cycle->log);
    if (pool == NULL) {
        return NULL;
    }

    cache = ngx_pcalloc(pool, sizeof(ferryman_cache_t));
    if (cache == NULL) {
        ngx_destroy_pool(pool);
        return NULL;
    }

    cache->pool = pool;
    cache->generation = generation;
    ngx_rbtree_init(&cache->hosts, &cache->hosts_sentinel,
                    ngx_str_rbtree_insert_value);
    ngx_rbtree_init(&cache->backends, &cache->backends_sentinel,
                    ngx_str_rbtree_insert_value);

    ferryman_cache = cache;

    return cache;
}


static void
ferryman_release_cache(void *data)
{
    ferryman_cache_t  *cache = data;

    if (--cache->refs == 0 && cache != ferryman_cache) {
        ngx_destroy_pool(cache->pool);
    }
}


/* A failure window that has closed is removed, so that nfailures counts
 * open ones only. Called with the zone locked. */
static ngx_uint_t
ferryman_drop_if_expired(ferryman_shctx_t *sh, ngx_slab_pool_t *shpool,
    ferryman_failure_t *f)
{
    if ((ngx_msec_int_t) (f->expires - ngx_current_msec) > 0) {
        return 0;
    }

    ngx_rbtree_delete(&sh->failures, &f->sn.node);
    ngx_slab_free_locked(shpool, f);
    (void) ngx_atomic_fetch_add(&sh->nfailures, -1);

    return 1;
}


/* A zone entry of the given size keyed by the peer's name (stored after it),
 * inserted into tree. Called with the zone locked. */
static void *
ferryman_peer_node(ngx_slab_pool_t *shpool, ngx_rbtree_t *tree,
    ferryman_peer_t *peer, size_t size)
{
    ngx_str_node_t  *sn;

    sn = ngx_slab_calloc_locked(shpool, size + peer->name.len);
    if (sn == NULL) {
        return NULL;
    }

    sn->str.data = (u_char *) sn + size;
    sn->str.len = peer->name.len;
    ngx_memcpy(sn->str.data, peer->name.data, peer->name.len);
    sn->node.key = peer->hash;
    ngx_rbtree_insert(tree, &sn->node);

    return sn;
}


/* Passive health. Called with the zone locked. */
static ngx_uint_t
ferryman_is_down(ferryman_shctx_t *sh, ngx_slab_pool_t *shpool,
    ferryman_peer_t *peer, ngx_uint_t max_fails)
{
    ferryman_failure_t  *f;

    f = (ferryman_failure_t *) ngx_str_rbtree_lookup(&sh->failures,
                                                     &peer->name, peer->hash);
    if (f == NULL) {
        return 0;
    }

    if (ferryman_drop_if_expired(sh, shpool, f)) {
        return 0;
    }

    return f->fails >= max_fails;
}


/* Drops expired failures, so that once peers recover (or are gone from every
 * endpoint set) nfailures falls back to 0 and requests skip the lock again.
 * Called with the zone locked. */
static void
ferryman_sweep(ferryman_shctx_t *sh, ngx_slab_pool_t *shpool)
{
    ngx_rbtree_node_t  *node, *next, *sentinel;

    sh->sweep_at = ngx_current_msec + 1000;
    sentinel = sh->failures.sentinel;

    if (sh->failures.root == sentinel) {
        return;
    }

    for (node = ngx_rbtree_min(sh->failures.root, sentinel);
         node != NULL;
         node = next)
    {
        next = ngx_rbtree_next(&sh->failures, node);
        (void) ferryman_drop_if_expired(sh, shpool,
                                        (ferryman_failure_t *) node);
    }
}


/* A failure opens a window of fail_timeout; max_fails failures within it
 * take the peer out until the window closes. */
static void
ferryman_count_failure(ferryman_peer_t *peer, ngx_msec_t fail_timeout)
{
    ngx_slab_pool_t     *shpool;
    ferryman_shctx_t    *sh;
    ferryman_failure_t  *f;

    sh = ferryman_shared();
    if (sh == NULL) {
        return;
    }

    shpool = ferryman_slab();

    ngx_shmtx_lock(&shpool->mutex);

    ferryman_sweep(sh, shpool);

    f = (ferryman_failure_t *) ngx_str_rbtree_lookup(&sh->failures,
                                                     &peer->name, peer->hash);
    if (f == NULL) {
        f = ferryman_peer_node(shpool, &sh->failures, peer,
                               sizeof(ferryman_failure_t));
        if (f == NULL) {
            ngx_shmtx_unlock(&shpool->mutex);
            return;
        }

        f->expires = ngx_current_msec;
        (void) ngx_atomic_fetch_add(&sh->nfailures, 1);
    }

    if ((ngx_msec_int_t) (f->expires - ngx_current_msec) <= 0) {
        f->fails = 0;
        f->expires = ngx_current_msec + fail_timeout;
    }

    f->fails++;

    ngx_shmtx_unlock(&shpool->mutex);
}


/* least_conn: requests in flight per peer. Called with the zone locked. */
static ngx_uint_t
ferryman_active_load(ferryman_shctx_t *sh, ferryman_peer_t *peer)
{
    ferryman_active_t  *a;

    a = (ferryman_active_t *) ngx_str_rbtree_lookup(&sh->active, &peer->name,
                                                    peer->hash);

    return a ? a->requests : 0;
}


/* Returns whether the peer is counted (a full zone leaves it uncounted).
 * Called with the zone locked. */
static ngx_uint_t
ferryman_active_add(ferryman_shctx_t *sh, ngx_slab_pool_t *shpool,
    ferryman_peer_t *peer, ngx_int_t delta)
{
    ferryman_active_t  *a;

    a = (ferryman_active_t *) ngx_str_rbtree_lookup(&sh->active, &peer->name,
                                                    peer->hash);

    if (delta < 0) {
        if (a != NULL && --a->requests == 0) {
            ngx_rbtree_delete(&sh->active, &a->sn.node);
            ngx_slab_free_locked(shpool, a);
        }

        return 0;
    }

    if (a == NULL) {
        a = ferryman_peer_node(shpool, &sh->active, peer,
                               sizeof(ferryman_active_t));
        if (a == NULL) {
            return 0;
        }
    }

    a->requests++;

    return 1;
}


static ngx_uint_t
ferryman_tried(ferryman_ctx_t *ctx, ngx_uint_t i)
{
    return (ctx->tried[i / 64] >> (i % 64)) & 1;
}


static ngx_int_t
ferryman_get_peer(ngx_peer_connection_t *pc, void *data)
{
    ferryman_ctx_t  *ctx = data;

    ngx_uint_t           n, i, offset, start, chosen, fallback, check, lc,
                         locked, load, best_load;
    ngx_slab_pool_t     *shpool;
    ferryman_shctx_t    *sh;
    ferryman_peer_t     *peers;

    sh = ferryman_shared();
    if (sh == NULL) {
        return NGX_ERROR;
    }

    peers = ctx->backend->peers;
    n = ctx->backend->npeers;
    start = ngx_atomic_fetch_add(&sh->rr[ctx->backend->slot], 1) % n;

    check = ctx->balance->max_fails > 0 && sh->nfailures > 0;
    lc = ctx->balance->least_conn;
    /* Round-robin without failures on record, the common case, locks nothing. */
    locked = check || lc;
    shpool = ferryman_slab();
    chosen = n;
    fallback = n;
    best_load = 0;

    if (locked) {
        ngx_shmtx_lock(&shpool->mutex);

        if (check
            && (ngx_msec_int_t) (ngx_current_msec - sh->sweep_at) >= 0)
        {
            ferryman_sweep(sh, shpool);
        }
    }

    for (offset = 0; offset < n; offset++) {
        i = (start + offset) % n;

        if (ferryman_tried(ctx, i)) {
            continue;
        }

        if (fallback == n) {
            fallback = i;
        }

        if (check
            && ferryman_is_down(sh, shpool, &peers[i],
                                ctx->balance->max_fails))
        {
            continue;
        }

        if (!lc) {
            chosen = i;
            break;
        }

        load = ferryman_active_load(sh, &peers[i]);

        if (chosen == n || load < best_load) {
            chosen = i;
            best_load = load;
        }
    }

    if (chosen == n) {
        /* Every peer is down: NGINX's rule, try one anyway. */
        chosen = fallback;
    }

    if (chosen != n && lc) {
        ctx->counted = ferryman_active_add(sh, shpool, &peers[chosen], 1);
    }

    if (locked) {
        ngx_shmtx_unlock(&shpool->mutex);
    }

    if (chosen == n) {
        return NGX_BUSY;
    }

    ctx->tried[chosen / 64] |= (uint64_t) 1 << (chosen % 64);
    ctx->current = &peers[chosen];
    /* NGINX frees every peer its get returned NGX_OK for (pc->sockaddr set):
     * before the next attempt, when the upstream request is finalized (also
     * early: the client went away, an error, a timeout), and the keepalive
     * module's free calls this one's when it keeps the connection. */
    ctx->flight = ferryman_flight_enter(sh, peers[chosen].hash,
                                        peers[chosen].flight_tag);

    pc->sockaddr = peers[chosen].sockaddr;
    pc->socklen = peers[chosen].socklen;
    pc->name = &peers[chosen].name;

    return NGX_OK;
}


static void
ferryman_free_peer(ngx_peer_connection_t *pc, void *data, ngx_uint_t state)
{
    ferryman_ctx_t  *ctx = data;

    ngx_slab_pool_t   *shpool;
    ferryman_shctx_t  *sh;

    sh = ferryman_shared();

    /* Called once per attempt: a failed one before the next, the last when
     * the request ends. */
    if (ctx->flight != NULL) {
        (void) ngx_atomic_fetch_add(ctx->flight, -1);
        ctx->flight = NULL;
    }

    if (ctx->counted && sh != NULL) {
        shpool = ferryman_slab();
        ngx_shmtx_lock(&shpool->mutex);
        (void) ferryman_active_add(sh, shpool, ctx->current, -1);
        ngx_shmtx_unlock(&shpool->mutex);
        ctx->counted = 0;
    }

    if ((state & NGX_PEER_FAILED) && ctx->current != NULL
        && ctx->balance->max_fails > 0)
    {
        ferryman_count_failure(ctx->current, ctx->balance->fail_timeout);
    }

    if (pc->tries) {
        pc->tries--;
    }
}


/* NGX_OK: proxy (the context set); NGX_ERROR: the slow path answers; or a
 * status the module answers. "limit": whether a route's rate limits can be
 * enforced here (in the precontent phase), else such a route is the slow
 * path's. */
static ngx_int_t
ferryman_route(ngx_http_request_t *r, ferryman_shctx_t *sh, ngx_uint_t limit)
{
    ngx_int_t                  rc, status;
    ngx_msec_t                 delay;
    ngx_str_t                 *name, *backend_name;
    ngx_uint_t                 https;
    ferryman_ctx_t            *ctx;
    ferryman_host_t           *host;
    ferryman_balance_t        *balance;
    ferryman_vs_upstream_t    *upstream;
    ferryman_limits_t         *limits;
    ferryman_cache_t          *cache;
    ferryman_backend_t        *backend;
    ngx_pool_cleanup_t        *cln;
    ngx_http_core_srv_conf_t  *cscf;

    cache = ferryman_current_cache(sh);
    if (cache == NULL) {
        return NGX_ERROR;
    }

    /* $host: the Host header's name, else the server's name ("_"). */
    name = &r->headers_in.server;
    if (name->len == 0) {
        cscf = ngx_http_get_module_srv_conf(r, ngx_http_core_module);
        name = &cscf->server_name;
    }

    host = ferryman_vhost(cache, name);
    if (host == NULL) {
        return NGX_ERROR;
    }

    https = 0;
#if (NGX_HTTP_SSL)
    https = r->connection->ssl != NULL;
#endif

    if (host->redirect && !https) {
        return NGX_ERROR;
    }

    /* Not this host's listener: Lua answers 404, as for an unknown host. */
    if (ferryman_wrong_listener(r, host, https)) {
        return NGX_ERROR;
    }

    delay = 0;

    if (host->vs != NULL) {
        limits = NULL;

        rc = ferryman_vs_route(r, host->vs, &upstream, &limits);

        if (rc != NGX_OK && rc != NGX_HTTP_NOT_FOUND) {
            return NGX_ERROR;
        }

        if (limits != NULL) {
            if (!limit) {
                return NGX_ERROR;
            }

            status = ferryman_limit_check(r, limits, &delay);

            if (status != NGX_DECLINED) {
                return status;
            }
        }

        if (rc == NGX_HTTP_NOT_FOUND) {
            /* No route: the VirtualServer's limits passed it; answered
             * once its delay is over. */
            if (delay == 0) {
                return NGX_HTTP_NOT_FOUND;
            }

            ctx = ngx_pcalloc(r->pool, sizeof(ferryman_ctx_t));
            cln = ngx_pool_cleanup_add(r->pool, 0);
            if (ctx == NULL || cln == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            /* host lives in the cache: kept until the request ends. */
            cln->handler = ferryman_release_cache;
            cln->data = cache;
            cache->refs++;

            ctx->cache = cache;
            ctx->host = host;
            ctx->delay = delay;
            ctx->status = NGX_HTTP_NOT_FOUND;
            ngx_http_set_ctx(r, ctx, ngx_http_ferryman_module);

            return NGX_OK;
        }

        backend_name = &upstream->backend;
        balance = &upstream->balance;

    } else {
        backend_name = ferryman_match(host, &r->uri);
        if (backend_name == NULL) {
            return NGX_ERROR;
        }

        balance = &host->balance;
    }

    if (cache->last_backend_name == backend_name->data) {
        backend = cache->last_backend;

    } else {
        backend = ferryman_backend(cache, backend_name);

        if (backend != NULL) {
            cache->last_backend_name = backend_name->data;
            cache->last_backend = backend;
        }
    }

    if (backend == NULL || backend->npeers == 0) {
        /* A VirtualServer's upstream without endpoints: its route was
         * chosen (a split already rolled), so answer as the slow path would
         * rather than let it route again. */
        return host->vs != NULL ? NGX_HTTP_SERVICE_UNAVAILABLE : NGX_ERROR;
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ferryman_ctx_t));
    if (ctx == NULL) {
        return NGX_ERROR;
    }

    if (backend->npeers <= 64) {
        ctx->tried = &ctx->tried_few;

    } else {
        ctx->tried = ngx_pcalloc(r->pool,
                                 (backend->npeers + 63) / 64 * sizeof(uint64_t));
        if (ctx->tried == NULL) {
            return NGX_ERROR;
        }
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    cln->handler = ferryman_release_cache;
    cln->data = cache;
    cache->refs++;

    ctx->cache = cache;
    ctx->host = host;
    ctx->balance = balance;
    ctx->backend = backend;
    ctx->delay = delay;

    ngx_http_set_ctx(r, ctx, ngx_http_ferryman_module);

    return NGX_OK;
}


/* The precontent phase of locations with "ferryman_route": a request the
 * fast path proxies goes on to proxy_pass with its route in the module's
 * context; any other is handed to the slow path's named location. Routing
 * here rather than in the upstream's peer initialisation keeps the
 * connection alive: a failed initialisation ends in a 500, and NGINX closes
 * the connection after any 500, even one error_page turns into a 404. */
static ngx_int_t
ngx_http_ferryman_route_handler(ngx_http_request_t *r)
{
    ngx_int_t                 rc;
    ferryman_ctx_t           *ctx;
    ferryman_shctx_t         *sh;
    ferryman_loc_conf_t      *flcf;

    flcf = ngx_http_get_module_loc_conf(r, ngx_http_ferryman_module);

    if (flcf->slow_path.len == 0 || r != r->main) {
        return NGX_DECLINED;
    }

    ctx = ngx_http_get_module_ctx(r, ngx_http_ferryman_module);

    if (ctx != NULL) {
        /* Routed already (back from a rate limit's delay). */
        return ctx->status ? (ngx_int_t) ctx->status : NGX_DECLINED;
    }

    sh = ferryman_shared();
    rc = NGX_DECLINED;

    if (sh != NULL) {
        rc = ferryman_route(r, sh, 1);
        /* Answered here (proxied, refused by a rate limit, no endpoint) or
         * handed to the slow path. */
        ferryman_count(sh, rc == NGX_ERROR ? 1 : 0);
    }

    if (rc == NGX_OK) {
        ctx = ngx_http_get_module_ctx(r, ngx_http_ferryman_module);

        if (ctx->delay > 0) {
            /* Back here once it is over: the context lets it through. */
            return ferryman_limit_wait(r, ctx->delay);
        }

        return NGX_DECLINED;
    }

    if (rc != NGX_ERROR && rc != NGX_DECLINED) {
        return rc;
    }

    (void) ngx_http_named_location(r, &flcf->slow_path);

    ngx_http_finalize_request(r, NGX_DONE);

    return NGX_DONE;
}


static ngx_int_t
ferryman_init_peer(ngx_http_request_t *r, ngx_http_upstream_srv_conf_t *us)
{
    ngx_int_t                  rc;
    ferryman_ctx_t            *ctx;
    ferryman_shctx_t          *sh;
    ferryman_balance_t        *b;
    ngx_http_upstream_conf_t  *conf;

    ctx = ngx_http_get_module_ctx(r, ngx_http_ferryman_module);

    if (ctx == NULL) {
        /* A location without ferryman_route (an nginx.conf older than this
         * module): route here; NGX_ERROR ends in a 500 that its
         * `error_page 500 = @ferryman` hands to the slow path. */
        sh = ferryman_shared();
        if (sh == NULL) {
            return NGX_ERROR;
        }

        rc = ferryman_route(r, sh, 0);
        ferryman_count(sh, rc == NGX_OK ? 0 : 1);

        if (rc != NGX_OK) {
            return NGX_ERROR;
        }

        ctx = ngx_http_get_module_ctx(r, ngx_http_ferryman_module);
    }

    r->upstream->peer.get = ferryman_get_peer;
    r->upstream->peer.free = ferryman_free_peer;
    r->upstream->peer.data = ctx;
    /* A failed attempt moves on to another peer, each tried once, at most a
     * VirtualServer upstream's next-upstream-tries. */
    b = ctx->balance;
    r->upstream->peer.tries = ctx->backend->npeers;

    if (b->tries > 0 && b->tries < ctx->backend->npeers) {
        r->upstream->peer.tries = b->tries;
    }

    if (b->connect_timeout || b->read_timeout || b->send_timeout) {
        /* Its timeouts: this request's own copy of the location's settings,
         * as the Lua balancer's set_timeouts makes one. */
        conf = ngx_palloc(r->pool, sizeof(ngx_http_upstream_conf_t));
        if (conf == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(conf, r->upstream->conf, sizeof(ngx_http_upstream_conf_t));

        if (b->connect_timeout) {
            conf->connect_timeout = b->connect_timeout;
        }

        if (b->read_timeout) {
            conf->read_timeout = b->read_timeout;
        }

        if (b->send_timeout) {
            conf->send_timeout = b->send_timeout;
        }

        r->upstream->conf = conf;
    }

    return NGX_OK;
}


static ngx_int_t
ferryman_init_upstream(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us)
{
    us->peer.init = ferryman_init_peer;

    return NGX_OK;
}


static ngx_int_t
ferryman_set_variable(ngx_http_variable_value_t *v, u_char *data, size_t len)
{
    v->data = data;
    v->len = len;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    return NGX_OK;
}


/* $ferryman_vhost and $ferryman_backend for the access log (latency
 * metrics); the slow path sets the same variables from Lua. */
static ngx_int_t
ferryman_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    ngx_str_t       *s;
    ferryman_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_ferryman_module);
    if (ctx == NULL || (data && ctx->backend == NULL)) {
        v->not_found = 1;
        return NGX_OK;
    }

    s = data ? &ctx->backend->sn.str : &ctx->host->sn.str;

    return ferryman_set_variable(v, s->data, s->len);
}


/* $ferryman_host: the authority requests were routed by, as the client sent
 * it (port included): an absolute-form request-target's (RFC 9112 3.2.2: it
 * wins over Host, as in $host), else the Host header, else $host. Upstream
 * requests carry it, as Kubernetes' Ingress expects. */
static ngx_int_t
ferryman_host_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    u_char                    *end;
    ngx_str_t                 *s;
    ngx_http_core_srv_conf_t  *cscf;

    if (r->host_start != NULL && r->host_end != NULL) {
        /* The parser leaves these set for absolute-form targets only. */
        end = (r->port_end != NULL && r->port_end > r->host_end)
              ? r->port_end : r->host_end;

        return ferryman_set_variable(v, r->host_start, end - r->host_start);
    }

    if (r->headers_in.host != NULL && r->headers_in.host->value.len > 0) {
        s = &r->headers_in.host->value;

    } else if (r->headers_in.server.len > 0) {
        s = &r->headers_in.server;

    } else {
        cscf = ngx_http_get_module_srv_conf(r, ngx_http_core_module);
        s = &cscf->server_name;
    }

    return ferryman_set_variable(v, s->data, s->len);
}


/* $ferryman_connection: "upgrade" when the client asks for a WebSocket,
 * else empty, which leaves the upstream Connection header out (keepalive).
 * $ferryman_upgrade: the client's Upgrade header when it asks for a
 * WebSocket, else empty: no other protocol is forwarded (h2c would let a
 * client talk HTTP/2 to the backend past every rule). NGINX's own
 * $http_upgrade searches the request's header list on every request; this
 * reads the field NGINX already keeps. */
static ngx_int_t
ferryman_upgrade_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_table_elt_t  *upgrade;

    upgrade = r->headers_in.upgrade;

    if (upgrade == NULL || upgrade->value.len != sizeof("websocket") - 1
        || ngx_strncasecmp(upgrade->value.data, (u_char *) "websocket",
                           sizeof("websocket") - 1) != 0)
    {
        return ferryman_set_variable(v, (u_char *) "", 0);
    }

    if (data) {
        return ferryman_set_variable(v, (u_char *) "upgrade",
                                     sizeof("upgrade") - 1);
    }

    return ferryman_set_variable(v, upgrade->value.data, upgrade->value.len);
}


static ngx_http_variable_t  ferryman_variables[] = {

    /* Without this module, nginx.conf defines these three itself. */
    { ngx_string("ferryman_host"), NULL, ferryman_host_variable, 0, 0, 0 },

    { ngx_string("ferryman_connection"), NULL, ferryman_upgrade_variable,
      1, 0, 0 },

    { ngx_string("ferryman_upgrade"), NULL, ferryman_upgrade_variable, 0, 0, 0 },

    { ngx_string("ferryman_vhost"), NULL, ferryman_variable, 0,
      NGX_HTTP_VAR_CHANGEABLE|NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("ferryman_backend"), NULL, ferryman_variable, 1,
      NGX_HTTP_VAR_CHANGEABLE|NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


static ngx_int_t
ngx_http_ferryman_preconfiguration(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    /* The module stays loaded across reloads: forget the last cycle's zone. */
    ferryman_zone = NULL;
    ferryman_limit_preconfiguration();

    for (v = ferryman_variables; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


/* $ferryman_listener's index when the configuration defines it (a map in
 * nginx.conf's public part); asking for the index of an undefined variable
 * would fail the configuration ("unknown variable"), so look first. */
static ngx_int_t
ferryman_listener_variable(ngx_conf_t *cf, ngx_http_core_main_conf_t *cmcf)
{
    ngx_uint_t       i;
    ngx_hash_key_t  *key;
    ngx_str_t        name = ngx_string("ferryman_listener");

    ferryman_listener_index = NGX_ERROR;

    if (cmcf->variables_keys == NULL) {
        return NGX_OK;
    }

    key = cmcf->variables_keys->keys.elts;

    for (i = 0; i < cmcf->variables_keys->keys.nelts; i++) {
        if (key[i].key.len == name.len
            && ngx_strncmp(key[i].key.data, name.data, name.len) == 0)
        {
            ferryman_listener_index = ngx_http_get_variable_index(cf, &name);
            return ferryman_listener_index == NGX_ERROR ? NGX_ERROR : NGX_OK;
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_ferryman_postconfiguration(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    if (ferryman_listener_variable(cf, cmcf) != NGX_OK) {
        return NGX_ERROR;
    }

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_ferryman_route_handler;

    /* VirtualServer routes' rate limits: wherever the module routes. */
    if (ferryman_zone != NULL
        && ferryman_limit_postconfiguration(cf, &ngx_http_ferryman_module)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


static void *
ngx_http_ferryman_create_loc_conf(ngx_conf_t *cf)
{
    /* slow_path: { 0, NULL }, i.e. unset */
    return ngx_pcalloc(cf->pool, sizeof(ferryman_loc_conf_t));
}


static char *
ngx_http_ferryman_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ferryman_loc_conf_t  *prev = parent;
    ferryman_loc_conf_t  *conf = child;

    ngx_conf_merge_str_value(conf->slow_path, prev->slow_path, "");

    if (conf->slow_path.len > 0 && conf->slow_path.data[0] != '@') {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ferryman_route needs a named location, not \"%V\"",
                           &conf->slow_path);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static ngx_int_t
ferryman_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_slab_pool_t   *shpool;
    ferryman_shctx_t  *sh;

    if (data) {
        /* A reload: the records stay. */
        shm_zone->data = data;
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        shm_zone->data = shpool->data;
        return NGX_OK;
    }

    sh = ngx_slab_calloc(shpool, sizeof(ferryman_shctx_t));
    if (sh == NULL) {
        return NGX_ERROR;
    }

    ngx_rbtree_init(&sh->records, &sh->records_sentinel,
                    ngx_str_rbtree_insert_value);
    ngx_rbtree_init(&sh->failures, &sh->failures_sentinel,
                    ngx_str_rbtree_insert_value);
    ngx_rbtree_init(&sh->active, &sh->active_sentinel,
                    ngx_str_rbtree_insert_value);

    shpool->data = sh;
    /* A full zone is reported to ferryman by the push, not logged per try. */
    shpool->log_nomem = 0;
    shm_zone->data = sh;

    return NGX_OK;
}


static char *
ngx_http_ferryman_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ssize_t          size;
    ngx_str_t       *value;

    static ngx_str_t  name = ngx_string("ferryman_fast");

    value = cf->args->elts;

    if (ferryman_zone != NULL) {
        return "is duplicate";
    }

    size = ngx_parse_size(&value[1]);
    if (size == NGX_ERROR || size < (ssize_t) (sizeof(ferryman_shctx_t) * 2)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone size \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    ferryman_zone = ngx_shared_memory_add(cf, &name, size,
                                          &ngx_http_ferryman_module);
    if (ferryman_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    ferryman_zone->init = ferryman_init_zone;

    return NGX_CONF_OK;
}


static char *
ngx_http_ferryman_fast(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_upstream_srv_conf_t  *uscf;

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);

    if (uscf->peer.init_upstream) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "load balancing method redefined");
    }

    uscf->peer.init_upstream = ferryman_init_upstream;

    return NGX_CONF_OK;
}


/*
 * For ngx_stream_ferryman_module (TransportServers; a separate .so that
 * nginx.conf loads after this one, and NGINX dlopens modules RTLD_GLOBAL):
 * its records and the same per-peer state (passive health, connections) in
 * this module's zone, so that an endpoint change reaches TCP/UDP listeners
 * by the same push as HTTP hosts. Each call locks the zone itself.
 */

ngx_int_t
ngx_ferryman_stream_record(ngx_str_t *key, ngx_pool_t *pool, ngx_str_t *value,
    uint32_t *slot)
{
    ngx_int_t           rc;
    ngx_slab_pool_t    *shpool;
    ferryman_shctx_t   *sh;
    ferryman_record_t  *rec;

    value->len = 0;
    value->data = NULL;
    *slot = 0;

    sh = ferryman_shared();
    if (sh == NULL) {
        return NGX_DECLINED;
    }

    shpool = ferryman_slab();
    rc = NGX_OK;

    ngx_shmtx_lock(&shpool->mutex);

    rec = ferryman_find_record(sh, key, ngx_crc32_short(key->data, key->len));

    if (rec != NULL) {
        value->data = ngx_pnalloc(pool, rec->value.len);

        if (value->data == NULL) {
            rc = NGX_ERROR;

        } else {
            ngx_memcpy(value->data, rec->value.data, rec->value.len);
            value->len = rec->value.len;
            *slot = rec->slot & ~FERRYMAN_SLOT_SHARED;
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    return rc;
}


ngx_uint_t
ngx_ferryman_stream_next(uint32_t slot)
{
    ferryman_shctx_t  *sh;

    sh = ferryman_shared();
    if (sh == NULL) {
        return 0;
    }

    return ngx_atomic_fetch_add(&sh->rr[slot % FERRYMAN_RR_SLOTS], 1);
}


void
ngx_ferryman_stream_peer_state(ngx_str_t *name, uint32_t hash,
    ngx_uint_t max_fails, ngx_uint_t *down, ngx_uint_t *active)
{
    ngx_slab_pool_t   *shpool;
    ferryman_peer_t    peer;
    ferryman_shctx_t  *sh;

    *down = 0;
    *active = 0;

    sh = ferryman_shared();
    if (sh == NULL) {
        return;
    }

    ngx_memzero(&peer, sizeof(ferryman_peer_t));
    peer.name = *name;
    peer.hash = hash;
    shpool = ferryman_slab();

    ngx_shmtx_lock(&shpool->mutex);

    if (max_fails > 0 && sh->nfailures > 0) {
        *down = ferryman_is_down(sh, shpool, &peer, max_fails);
    }

    *active = ferryman_active_load(sh, &peer);

    ngx_shmtx_unlock(&shpool->mutex);
}


ngx_uint_t
ngx_ferryman_stream_enter(ngx_str_t *name, uint32_t hash)
{
    ngx_uint_t         counted;
    ngx_slab_pool_t   *shpool;
    ferryman_peer_t    peer;
    ferryman_shctx_t  *sh;

    sh = ferryman_shared();
    if (sh == NULL) {
        return 0;
    }

    ngx_memzero(&peer, sizeof(ferryman_peer_t));
    peer.name = *name;
    peer.hash = hash;
    shpool = ferryman_slab();

    ngx_shmtx_lock(&shpool->mutex);
    counted = ferryman_active_add(sh, shpool, &peer, 1);
    ngx_shmtx_unlock(&shpool->mutex);

    return counted;
}


void
ngx_ferryman_stream_leave(ngx_str_t *name, uint32_t hash, ngx_uint_t counted,
    ngx_msec_t failed_for)
{
    ngx_slab_pool_t   *shpool;
    ferryman_peer_t    peer;
    ferryman_shctx_t  *sh;

    sh = ferryman_shared();
    if (sh == NULL) {
        return;
    }

    ngx_memzero(&peer, sizeof(ferryman_peer_t));
    peer.name = *name;
    peer.hash = hash;

    if (counted) {
        shpool = ferryman_slab();
        ngx_shmtx_lock(&shpool->mutex);
        (void) ferryman_active_add(sh, shpool, &peer, -1);
        ngx_shmtx_unlock(&shpool->mutex);
    }

    if (failed_for) {
        ferryman_count_failure(&peer, failed_for);
    }
}
