/*
 * TransportServers' peers: a session's S record and endpoint sets decoded
 * into its peers, and the peer of each attempt by the record's method (rr,
 * lc, random, random2, random2lc), max_fails and max_conns, over the
 * per-peer state in ngx_http_ferryman_module's zone.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_stream.h>

#include "ngx_stream_ferryman.h"
#include "ngx_ferryman_stream_api.h"
#include "ngx_ferryman_fields.h"


static ngx_uint_t
ferryman_stream_number(ngx_str_t *field)
{
    ngx_int_t  n;

    n = ngx_atoi(field->data, field->len);

    return n == NGX_ERROR ? 0 : (ngx_uint_t) n;
}


/* Appends the peers of endpoint set `backend` to ctx->peers (room for
 * `room` in all). */
static ngx_int_t
ferryman_stream_peers(ferryman_stream_ctx_t *ctx, ngx_pool_t *pool,
    ngx_str_t *backend, uint32_t *slot)
{
    u_char                  *pos, *end, buf[FERRYMAN_STREAM_MAX_KEY];
    ngx_int_t                rc;
    ngx_str_t                key, value, field;
    ngx_uint_t               count;
    ferryman_stream_peer_t  *peers, *peer;

    if (backend->len + 2 > FERRYMAN_STREAM_MAX_KEY) {
        return NGX_OK;
    }

    buf[0] = 'E';
    buf[1] = ':';
    ngx_memcpy(buf + 2, backend->data, backend->len);
    key.data = buf;
    key.len = backend->len + 2;

    if (ngx_ferryman_stream_record(&key, pool, &value, slot) == NGX_ERROR) {
        return NGX_ERROR;
    }

    count = ngx_ferryman_count_fields(&value);

    peers = ngx_palloc(pool, (ctx->npeers + count)
                             * sizeof(ferryman_stream_peer_t));
    if (peers == NULL) {
        return NGX_ERROR;
    }

    if (ctx->npeers) {
        ngx_memcpy(peers, ctx->peers,
                   ctx->npeers * sizeof(ferryman_stream_peer_t));
    }

    ctx->peers = peers;
    pos = value.data;
    end = pos + value.len;

    while (ngx_ferryman_field(&pos, end, &field) == NGX_OK) {
        peer = &peers[ctx->npeers];

        rc = ngx_ferryman_peer(pool, &field, &peer->sockaddr, &peer->socklen,
                               &peer->name, &peer->hash);
        if (rc == NGX_ERROR) {
            return NGX_ERROR;
        }

        if (rc == NGX_OK) {
            ctx->npeers++;
        }
    }

    return NGX_OK;
}


static ngx_uint_t
ferryman_stream_tried(ferryman_stream_ctx_t *ctx, ngx_uint_t i)
{
    return (ctx->tried[i / 64] >> (i % 64)) & 1;
}


/* The first usable peer of [from, to) from offset start on, other than
 * `other`: not tried, not full (max_conns); an untried peer that is only out
 * (max_fails) goes to *spare instead, for when every peer is (NGINX's rule:
 * then one is tried anyway). With `least`, the one with the fewest
 * connections (ties: the first). Returns to when there is none. */
static ngx_uint_t
ferryman_stream_first(ferryman_stream_ctx_t *ctx, ngx_uint_t from,
    ngx_uint_t to, ngx_uint_t start, ngx_uint_t other, ngx_uint_t least,
    ngx_uint_t *spare, ngx_uint_t *load)
{
    ngx_uint_t  n, i, k, chosen, down, active;

    n = to - from;
    chosen = to;

    for (k = 0; k < n; k++) {
        i = from + (start + k) % n;

        if (i == other || ferryman_stream_tried(ctx, i)) {
            continue;
        }

        ngx_ferryman_stream_peer_state(&ctx->peers[i].name,
                                       ctx->peers[i].hash, ctx->max_fails,
                                       &down, &active);

        if (ctx->max_conns && active >= ctx->max_conns) {
            continue;
        }

        if (down) {
            if (*spare == ctx->npeers) {
                *spare = i;
            }
            continue;
        }

        if (chosen == to || active < *load) {
            chosen = i;
            *load = active;
        }

        if (!least) {
            break;
        }
    }

    return chosen;
}


/* The peer to try among [from, to) by the method; to when there is none. */
static ngx_uint_t
ferryman_stream_pick(ferryman_stream_ctx_t *ctx, ngx_uint_t from,
    ngx_uint_t to, ngx_uint_t *spare)
{
    ngx_uint_t  n, a, b, load_a, load_b;

    n = to - from;
    if (n == 0) {
        return to;
    }

    load_a = 0;
    load_b = 0;

    switch (ctx->method) {

    case FERRYMAN_RR:
    case FERRYMAN_LC:
        return ferryman_stream_first(ctx, from, to,
                                     ngx_ferryman_stream_next(ctx->slot) % n,
                                     to, ctx->method == FERRYMAN_LC, spare,
                                     &load_a);

    case FERRYMAN_RANDOM:
        return ferryman_stream_first(ctx, from, to,
                                     (ngx_uint_t) ngx_random() % n, to, 0,
                                     spare, &load_a);

    default:
        /* random two [least_conn]: two peers at random, the one with fewer
         * connections (NGINX's least_conn is its default for two). */
        a = ferryman_stream_first(ctx, from, to,
                                  (ngx_uint_t) ngx_random() % n, to, 0,
                                  spare, &load_a);
        if (a == to) {
            return to;
        }

        b = ferryman_stream_first(ctx, from, to,
                                  (ngx_uint_t) ngx_random() % n, a, 0,
                                  spare, &load_b);

        return b != to && load_b < load_a ? b : a;
    }
}


static ngx_int_t
ferryman_stream_get_peer(ngx_peer_connection_t *pc, void *data)
{
    ferryman_stream_ctx_t  *ctx = data;

    ngx_uint_t  chosen, spare;

    if (ctx->fallback != NULL) {
        /* ferryman's own HTTPS listener: the PROXY protocol header tells it
         * the client's address (set per attempt by the proxy module just
         * before this get). */
        ctx->session->upstream->proxy_protocol = 1;
        pc->sockaddr = ctx->fallback->sockaddr;
        pc->socklen = ctx->fallback->socklen;
        pc->name = &ctx->fallback->name;
        return NGX_OK;
    }

    spare = ctx->npeers;
    chosen = ferryman_stream_pick(ctx, 0, ctx->nprimary, &spare);

    if (chosen == ctx->nprimary) {
        chosen = ferryman_stream_pick(ctx, ctx->nprimary, ctx->npeers,
                                      &spare);
    }

    if (chosen == ctx->npeers) {
        chosen = spare;
    }

    if (chosen == ctx->npeers) {
        return NGX_BUSY;
    }

    ctx->tried[chosen / 64] |= (uint64_t) 1 << (chosen % 64);
    ctx->current = &ctx->peers[chosen];
    ctx->counted = ngx_ferryman_stream_enter(&ctx->current->name,
                                             ctx->current->hash);

    pc->sockaddr = ctx->current->sockaddr;
    pc->socklen = ctx->current->socklen;
    pc->name = &ctx->current->name;

    return NGX_OK;
}


static void
ferryman_stream_free_peer(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state)
{
    ferryman_stream_ctx_t  *ctx = data;

    ngx_uint_t  failed;

    failed = state & NGX_PEER_FAILED;

    if (ctx->current != NULL) {
        ngx_ferryman_stream_leave(&ctx->current->name, ctx->current->hash,
                                  ctx->counted,
                                  failed && ctx->max_fails
                                  ? ctx->fail_timeout : 0);
        ctx->current = NULL;
        ctx->counted = 0;
    }

    if (failed
        && (!ctx->next_upstream
            || (ctx->next_upstream_timeout
                && ngx_current_msec - ctx->started
                   >= ctx->next_upstream_timeout)))
    {
        pc->tries = 0;
        return;
    }

    if (pc->tries) {
        pc->tries--;
    }
}


static ngx_int_t
ferryman_stream_init_peer(ngx_stream_session_t *s,
    ngx_stream_upstream_srv_conf_t *us)
{
    u_char                           buf[FERRYMAN_STREAM_MAX_KEY], *pos, *end;
    uint32_t                         slot, unused;
    ngx_int_t                        rc;
    ngx_stream_variable_value_t     *sni;
    ngx_str_t                        key, value, f[9];
    ngx_uint_t                       n, tries;
    ngx_pool_t                      *pool;
    ferryman_stream_ctx_t           *ctx;
    ngx_stream_upstream_t           *u;
    ngx_stream_ferryman_srv_conf_t  *conf;

    conf = ngx_stream_get_module_srv_conf(s, ngx_stream_ferryman_module);
    pool = s->connection->pool;
    u = s->upstream;

    ctx = ngx_pcalloc(pool, sizeof(ferryman_stream_ctx_t));
    if (ctx == NULL) {
        return NGX_ERROR;
    }

    ctx->session = s;
    ctx->started = ngx_current_msec;
    ctx->next_upstream = 1;

    u->peer.get = ferryman_stream_get_peer;
    u->peer.free = ferryman_stream_free_peer;
#if defined(angie_version)
    /* As in the HTTP balancer: Angie's modules find the session here. */
    u->peer.ctx = s;
#endif
    u->peer.data = ctx;
    u->peer.tries = 1;

    value.len = 0;

    if (conf->sni_index == NGX_ERROR) {
        rc = ferryman_stream_listener_record(conf, pool, 'S', buf, &key,
                                             &value);

    } else {
        sni = ngx_stream_get_indexed_variable(s, conf->sni_index);
        rc = NGX_OK;

        if (sni != NULL && !sni->not_found) {
            rc = ferryman_stream_host_record(conf, pool, 'S', sni->data,
                                             sni->len, buf, &key, &value);
        }
    }

    if (rc == NGX_OK && value.len == 0 && conf->terminate) {
        /* A TransportServer without a host holds the listener itself. */
        rc = ferryman_stream_listener_record(conf, pool, 'S', buf, &key,
                                             &value);
    }

    if (rc == NGX_ERROR) {
        return NGX_ERROR;
    }

    if (value.len == 0) {
        if (conf->fallback != NULL) {
            ctx->fallback = conf->fallback;
            return NGX_OK;
        }

        ngx_log_error(NGX_LOG_INFO, s->connection->log, 0,
                      "ferryman: no TransportServer on listener \"%V\"",
                      &conf->listener);
        return NGX_ERROR;
    }

    pos = value.data;
    end = pos + value.len;

    for (n = 0; n < 9; n++) {
        f[n].len = 0;
        f[n].data = NULL;
        if (ngx_ferryman_field(&pos, end, &f[n]) != NGX_OK) {
            break;
        }
    }

    if (n < 8) {
        ngx_log_error(NGX_LOG_ERR, s->connection->log, 0,
                      "ferryman: malformed record \"%V\"", &key);
        return NGX_ERROR;
    }

    if (f[1].len == 2 && ngx_strncmp(f[1].data, "lc", 2) == 0) {
        ctx->method = FERRYMAN_LC;

    } else if (f[1].len == 6 && ngx_strncmp(f[1].data, "random", 6) == 0) {
        ctx->method = FERRYMAN_RANDOM;

    } else if (f[1].len == 7 && ngx_strncmp(f[1].data, "random2", 7) == 0) {
        ctx->method = FERRYMAN_RANDOM2;

    } else if (f[1].len == 9 && ngx_strncmp(f[1].data, "random2lc", 9) == 0) {
        ctx->method = FERRYMAN_RANDOM2_LC;

    } else {
        ctx->method = FERRYMAN_RR;
    }

    ctx->max_fails = ferryman_stream_number(&f[2]);
    ctx->fail_timeout = ferryman_stream_number(&f[3]);
    ctx->max_conns = ferryman_stream_number(&f[4]);
    tries = ferryman_stream_number(&f[5]);
    ctx->next_upstream = ferryman_stream_number(&f[6]);
    ctx->next_upstream_timeout = ferryman_stream_number(&f[7]);

    if (ferryman_stream_peers(ctx, pool, &f[0], &slot) != NGX_OK) {
        return NGX_ERROR;
    }

    ctx->slot = slot;
    ctx->nprimary = ctx->npeers;

    if (f[8].len
        && ferryman_stream_peers(ctx, pool, &f[8], &unused) != NGX_OK)
    {
        return NGX_ERROR;
    }

    ctx->tried = ngx_pcalloc(pool, (ctx->npeers / 64 + 1) * sizeof(uint64_t));
    if (ctx->tried == NULL) {
        return NGX_ERROR;
    }

    u->peer.tries = ctx->npeers ? ctx->npeers : 1;

    if (tries && tries < u->peer.tries) {
        u->peer.tries = tries;
    }

    if (!ctx->next_upstream) {
        u->peer.tries = 1;
    }

    return NGX_OK;
}


ngx_int_t
ferryman_stream_init_upstream(ngx_conf_t *cf,
    ngx_stream_upstream_srv_conf_t *us)
{
    us->peer.init = ferryman_stream_init_peer;

    return NGX_OK;
}
