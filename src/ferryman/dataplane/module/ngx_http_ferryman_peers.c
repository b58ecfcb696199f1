/*
 * Per-peer state in the zone, shared by every worker and by the stream
 * module: passive health (failures within fail_timeout, NGINX's max_fails
 * semantics) and least_conn's requests or connections per peer.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman.h"


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
ngx_uint_t
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
void
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
void
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
ngx_uint_t
ferryman_active_load(ferryman_shctx_t *sh, ferryman_peer_t *peer)
{
    ferryman_active_t  *a;

    a = (ferryman_active_t *) ngx_str_rbtree_lookup(&sh->active, &peer->name,
                                                    peer->hash);

    return a ? a->requests : 0;
}


/* Returns whether the peer is counted (a full zone leaves it uncounted).
 * Called with the zone locked. */
ngx_uint_t
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


/* One request (or connection) fewer at a counted peer; locks the zone. */
void
ferryman_active_done(ferryman_shctx_t *sh, ferryman_peer_t *peer)
{
    ngx_slab_pool_t  *shpool;

    shpool = ferryman_slab();
    ngx_shmtx_lock(&shpool->mutex);
    (void) ferryman_active_add(sh, shpool, peer, -1);
    ngx_shmtx_unlock(&shpool->mutex);
}
