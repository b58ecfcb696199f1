/*
 * Routing, in the precontent phase of locations marked `ferryman_route`: the
 * virtual host, the route (an Ingress host's or a VirtualServer's), its rate
 * limits and the endpoint set, kept in the request's context for the
 * balancer; what the fast path does not proxy goes to the slow path.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman.h"


/* A request's context: its virtual host, which lives in the worker's cache,
 * so the cache is kept until the request ends; the rate limits' delay. */
static ferryman_ctx_t *
ferryman_new_ctx(ngx_http_request_t *r, ferryman_cache_t *cache,
    ferryman_host_t *host, ngx_msec_t delay)
{
    ferryman_ctx_t      *ctx;
    ngx_pool_cleanup_t  *cln;

    ctx = ngx_pcalloc(r->pool, sizeof(ferryman_ctx_t));
    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (ctx == NULL || cln == NULL) {
        return NULL;
    }

    cln->handler = ferryman_release_cache;
    cln->data = cache;
    cache->refs++;

    ctx->cache = cache;
    ctx->host = host;
    ctx->delay = delay;

    return ctx;
}


/* $host: the Host header's name (lowercased by NGINX), else the server's
 * name ("_", never a usable name). */
ngx_str_t *
ferryman_request_name(ngx_http_request_t *r)
{
    ngx_http_core_srv_conf_t  *cscf;

    if (r->headers_in.server.len) {
        return &r->headers_in.server;
    }

    cscf = ngx_http_get_module_srv_conf(r, ngx_http_core_module);
    return &cscf->server_name;
}


/* NGX_OK: proxy (the context set); NGX_ERROR: the slow path answers; or a
 * status the module answers. "limit": whether a route's rate limits can be
 * enforced here (in the precontent phase), else such a route is the slow
 * path's. */
ngx_int_t
ferryman_route(ngx_http_request_t *r, ferryman_shctx_t *sh, ngx_uint_t limit)
{
    ngx_uint_t         https;
    ferryman_host_t   *host;
    ferryman_cache_t  *cache;

    cache = ferryman_current_cache(sh);
    if (cache == NULL) {
        return NGX_ERROR;
    }

    host = ferryman_vhost(cache, ferryman_request_name(r));
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

    return ferryman_route_host(r, cache, host, limit);
}


ngx_int_t
ferryman_route_host(ngx_http_request_t *r, ferryman_cache_t *cache,
    ferryman_host_t *host, ngx_uint_t limit)
{
    ngx_int_t                  rc, status;
    ngx_msec_t                 delay;
    ngx_str_t                 *backend_name;
    ferryman_ctx_t            *ctx;
    ferryman_balance_t        *balance;
    ferryman_vs_upstream_t    *upstream;
    ferryman_limits_t         *limits;
    ferryman_access_t         *access;
    ferryman_vs_rewrite_t     *rewrite;
    ferryman_backend_t        *backend;

    delay = 0;
    rewrite = NULL;

    if (host->vs != NULL) {
        limits = NULL;
        access = NULL;

        rc = ferryman_vs_route(r, host->vs, &upstream, &limits, &access,
                               &rewrite);

        if (rc == NGX_HTTP_INTERNAL_SERVER_ERROR) {
            return rc;
        }

        if (rc != NGX_OK && rc != NGX_HTTP_NOT_FOUND) {
            return NGX_ERROR;
        }

        if ((limits != NULL || access != NULL) && !limit) {
            return NGX_ERROR;
        }

        if (limits != NULL) {
            status = ferryman_limit_check(r, limits, &delay);

            if (status != NGX_DECLINED) {
                return status;
            }
        }

        /* allow/deny after limit_req, as NGINX's phases order them (and the
         * Lua router): a refused request has counted in the limits and
         * waited their delay. */
        if (access != NULL && ferryman_access_check(r, access) != NGX_OK) {
            rc = NGX_HTTP_FORBIDDEN;
        }

        if (rc == NGX_HTTP_NOT_FOUND || rc == NGX_HTTP_FORBIDDEN) {
            /* No route or refused: the limits passed it; answered once
             * their delay is over. */
            if (delay == 0) {
                return rc;
            }

            ctx = ferryman_new_ctx(r, cache, host, delay);
            if (ctx == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }

            ctx->status = rc;
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

    /* Only now: a request handed to the slow path must keep the URI it
     * routes by. */
    if (rewrite != NULL) {
        rc = ferryman_vs_rewrite(r, rewrite);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    ctx = ferryman_new_ctx(r, cache, host, delay);
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

    ctx->balance = balance;
    ctx->backend = backend;

    ngx_http_set_ctx(r, ctx, ngx_http_ferryman_module);

    return NGX_OK;
}


/* Whether the request's body may be above the server's client_max_body_size
 * (the ConfigMap's): the location with "ferryman_route" takes any body, so
 * that a route may allow more than the server does, and such a request goes
 * to the slow path, which knows each route's limit. A body without a length
 * (chunked, or an HTTP/2 stream still open after its headers) may be. */
static ngx_flag_t
ferryman_body_beyond_default(ngx_http_request_t *r)
{
    off_t                       limit;
    ngx_http_core_srv_conf_t   *cscf;
    ngx_http_core_loc_conf_t   *server;

    cscf = ngx_http_get_module_srv_conf(r, ngx_http_core_module);
    server = cscf->ctx->loc_conf[ngx_http_core_module.ctx_index];
    limit = server->client_max_body_size;

    if (limit == 0) {
        return 0;
    }

    if (r->headers_in.content_length_n >= 0) {
        return r->headers_in.content_length_n > limit;
    }

    if (r->headers_in.chunked) {
        return 1;
    }

#if (NGX_HTTP_V2)
    if (r->stream != NULL && !r->stream->in_closed) {
        return 1;
    }
#endif

    return 0;
}


/* The precontent phase of locations with "ferryman_route": a request the
 * fast path proxies goes on to proxy_pass with its route in the module's
 * context; any other is handed to the slow path's named location. Routing
 * here rather than in the upstream's peer initialisation keeps the
 * connection alive: a failed initialisation ends in a 500, and NGINX closes
 * the connection after any 500, even one error_page turns into a 404. */
ngx_int_t
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

    if (sh != NULL && ferryman_body_beyond_default(r)) {
        ferryman_count(sh, 1);
        sh = NULL;
    }

    if (sh != NULL) {
        rc = flcf->gateway ? ferryman_gateway_route(r, sh)
                           : ferryman_route(r, sh, 1);
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
