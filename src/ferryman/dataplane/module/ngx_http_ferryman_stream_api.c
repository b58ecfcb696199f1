/*
 * For ngx_stream_ferryman_module (TransportServers; a separate .so that
 * nginx.conf loads after this one, and NGINX dlopens modules RTLD_GLOBAL):
 * its records and the same per-peer state (passive health, connections) in
 * this module's zone, so that an endpoint change reaches TCP/UDP listeners
 * by the same push as HTTP hosts. Each call locks the zone itself.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman.h"
#include "ngx_ferryman_stream_api.h"


/* The zone (NULL: none) and the peer as its per-peer state knows it: by
 * name and hash alone. */
static ferryman_shctx_t *
ferryman_stream_peer(ferryman_peer_t *peer, ngx_str_t *name, uint32_t hash)
{
    ngx_memzero(peer, sizeof(ferryman_peer_t));
    peer->name = *name;
    peer->hash = hash;

    return ferryman_shared();
}


ngx_int_t
ngx_ferryman_stream_record(ngx_str_t *key, ngx_pool_t *pool, ngx_str_t *value,
    uint32_t *slot)
{
    return ferryman_record_copy(key, pool, value, slot);
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

    sh = ferryman_stream_peer(&peer, name, hash);
    if (sh == NULL) {
        return;
    }
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

    sh = ferryman_stream_peer(&peer, name, hash);
    if (sh == NULL) {
        return 0;
    }
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
    ferryman_peer_t    peer;
    ferryman_shctx_t  *sh;

    sh = ferryman_stream_peer(&peer, name, hash);
    if (sh == NULL) {
        return;
    }

    if (counted) {
        ferryman_active_done(sh, &peer);
    }

    if (failed_for) {
        ferryman_count_failure(&peer, failed_for);
    }
}

