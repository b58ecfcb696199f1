/*
 * A worker's cache: the records its requests need, decoded once per
 * generation of the zone (virtual hosts and endpoint sets), dropped when a
 * commit moves the generation or when it grows past its bounds.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman.h"
#include "ngx_ferryman_fields.h"


static ferryman_cache_t  *ferryman_cache;


/* "<addr>#<port> ..." with IPv6 addresses unbracketed. */
static ngx_int_t
ferryman_parse_peers(ngx_pool_t *pool, ferryman_backend_t *backend,
    ngx_str_t *text)
{
    u_char           *pos, *end;
    ngx_int_t         rc;
    ngx_str_t         field;
    ferryman_peer_t  *peer;

    backend->peers = ngx_palloc(pool, ngx_ferryman_count_fields(text)
                                      * sizeof(ferryman_peer_t));
    if (backend->peers == NULL) {
        return NGX_ERROR;
    }

    pos = text->data;
    end = pos + text->len;

    while (ngx_ferryman_field(&pos, end, &field) == NGX_OK) {
        peer = &backend->peers[backend->npeers];

        rc = ngx_ferryman_peer(pool, &field, &peer->sockaddr, &peer->socklen,
                               &peer->name, &peer->hash);
        if (rc == NGX_ERROR) {
            return NGX_ERROR;
        }

        if (rc == NGX_OK) {
            peer->flight_tag = ferryman_flight_tag(peer->name.data,
                                                   peer->name.len);
            backend->npeers++;
        }
    }

    return NGX_OK;
}


/* A copy of the value of record kind:name (len 0 when there is none) and, for
 * an endpoint set, its round-robin counter. */
static ngx_int_t
ferryman_fetch(ferryman_cache_t *cache, u_char kind, ngx_str_t *name,
    ngx_str_t *value, uint32_t *slot)
{
    u_char     buf[FERRYMAN_MAX_KEY];
    ngx_str_t  key;

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

    return ferryman_record_copy(&key, cache->pool, value, slot);
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


/* Kind 'H': an Ingress or VirtualServer host ("<tls> <redirect> ...") and
 * its F record; kind 'X': a Gateway listener's routes for one name at one
 * socket, an F record, or "-" when the slow path serves them all. Both live
 * in one tree: an X name holds a ":", which no host name has. */
ferryman_host_t *
ferryman_cached_host(ferryman_cache_t *cache, u_char kind, ngx_str_t *name)
{
    uint32_t          hash, slot;
    ngx_str_t         value;
    ferryman_host_t  *host;

    hash = ngx_crc32_short(name->data, name->len);

    host = (ferryman_host_t *) ngx_str_rbtree_lookup(&cache->hosts, name, hash);

    if (host == NULL) {
        if (ferryman_fetch(cache, kind, name, &value, &slot) != NGX_OK) {
            return NULL;
        }

        host = ferryman_cache_node(cache, name, hash,
                                   sizeof(ferryman_host_t));
        if (host == NULL) {
            return NULL;
        }

        if (kind == 'X' && value.len > 0) {
            /* Found, whatever it holds: the look-up stops at this name. */
            host->found = 1;

            if (!(value.len == 1 && value.data[0] == '-')) {
                host->vs = ferryman_vs_parse(cache->pool, ngx_cycle->log,
                                             &value);
            }

        } else if (kind == 'H' && value.len > 0
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


static ferryman_host_t *
ferryman_host(ferryman_cache_t *cache, ngx_str_t *name)
{
    return ferryman_cached_host(cache, 'H', name);
}


/* Whether a name could be a virtual host's (a validated DNS name; $host is
 * lowercased): only those are looked up and cached, any other reaches the
 * catch-all at once, so clients cannot fill the cache with them. */
ngx_uint_t
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


ferryman_host_t *
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


ferryman_backend_t *
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


ferryman_cache_t *
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


void
ferryman_release_cache(void *data)
{
    ferryman_cache_t  *cache = data;

    if (--cache->refs == 0 && cache != ferryman_cache) {
        ngx_destroy_pool(cache->pool);
    }
}
