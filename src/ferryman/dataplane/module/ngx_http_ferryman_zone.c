/*
 * The shared zone "ferryman_fast" (ferryman_fast_zone) and its records: the
 * write side, which ferryman.lua's push handler calls through LuaJIT's FFI
 * (put, flush, commit), the copies the readers take, and the request
 * counters behind ferryman_fast_path_requests_total.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman.h"
#include "ngx_http_ferryman_shm.h"


ngx_shm_zone_t  *ferryman_zone;


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


/* The read side: the stream module's records, and each worker's cache's
 * (ngx_http_ferryman_cache.c). */

ngx_int_t
ferryman_record_copy(ngx_str_t *key, ngx_pool_t *pool, ngx_str_t *value,
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
            /* An index into a fixed array: always valid memory, even after
             * the record is gone (a stale one can at worst share a counter). */
            *slot = rec->slot & ~FERRYMAN_SLOT_SHARED;
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    return rc;
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
        if (key_len > 0 && key[0] == 'X') {
            sh->gateway_gaps = 1;
        }

        return FERRYMAN_BAD_KEY;
    }

    if (key[0] != 'H' && key[0] != 'E' && key[0] != 'F' && key[0] != 'S'
        && key[0] != 'T' && key[0] != 'X')
    {
        /* Only virtual hosts, endpoint sets, VirtualServer routes,
         * TransportServers' listeners and certificates
         * (ngx_stream_ferryman_module) and Gateway listeners' routes
         * (ngx_http_ferryman_gateway.c) are read here. */
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

        if (key[0] == 'X') {
            /* ferryman.lua removes the old value: a hole in the look-up. */
            sh->gateway_gaps = 1;
        }

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
    sh->gateway_gaps = 0;

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


/* Request counters, one cache line per worker (FERRYMAN_COUNTER_SLOTS). */

void
ferryman_count(ferryman_shctx_t *sh, ngx_uint_t which)
{
    /* Old workers of a reload may share a slot with new ones: atomic. */
    (void) ngx_atomic_fetch_add(
                     &sh->counts[ngx_worker % FERRYMAN_COUNTER_SLOTS][which], 1);
}


/* The zone. */

static ngx_int_t
ferryman_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_slab_pool_t   *shpool;
    ferryman_shctx_t  *sh;

    /* A reload keeps the records. */
    if (ngx_http_ferryman_shm_attach(shm_zone, data)) {
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
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


char *
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
