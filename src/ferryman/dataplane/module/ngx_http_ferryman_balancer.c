/*
 * The fast path's upstream (`ferryman_fast`): the peer of each attempt,
 * round-robin over a counter every worker shares or least_conn, skipping
 * peers that are down and those this request has tried.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman.h"


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

    ferryman_shctx_t  *sh;

    sh = ferryman_shared();

    /* Called once per attempt: a failed one before the next, the last when
     * the request ends. */
    if (ctx->flight != NULL) {
        (void) ngx_atomic_fetch_add(ctx->flight, -1);
        ctx->flight = NULL;
    }

    if (ctx->counted && sh != NULL) {
        ferryman_active_done(sh, ctx->current);
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
#if defined(angie_version)
    /* Angie's keepalive module finds the request through the peer's ctx,
     * which its own balancers set (NGINX has no such field). */
    r->upstream->peer.ctx = r;
#endif
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


ngx_int_t
ferryman_init_upstream(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us)
{
    us->peer.init = ferryman_init_peer;

    return NGX_OK;
}
