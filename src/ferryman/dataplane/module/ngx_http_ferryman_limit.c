/*
 * NIC's rateLimit Policy on the routes the module serves: NGINX's limit_req
 * (ngx_http_limit_req_module, 1.22), decision for decision, so that a
 * VirtualServer route whose only policy is a rate limit stays off the Lua
 * slow path (which costs ~9 us of NGINX CPU per request and serialises the
 * workers on one lock entry per hot key).
 *
 * As limit_req: per key, "excess" in thousandths of a request and the time of
 * the last counted request (ms); a request adds 1000 and the rate leaks
 * excess away; past burst it is refused (rejectCode, the log line at
 * logLevel) and its state is left as it was; beyond delay it waits
 * (excess - delay) / rate, the delay logged one level lower; nodelay never
 * waits; dryRun logs the same lines and lets every request through at once.
 * With several limits, each is looked up in order; the first over its burst
 * refuses the request and none is counted; otherwise all are counted and the
 * longest delay applies. An empty key is not limited.
 *
 * State: one shared zone ("ferryman_fast_limits", ferryman_limit_zone) for
 * every NIC zone, a node per (NIC zone, key), in a red-black tree by CRC32 and
 * a queue in least recently used order. The Lua slow path keeps its own
 * (lua_shared_dict ferryman_limits): kinds/virtualserver/records/fast.py serves a NIC zone in
 * C only when every route using it is served here, so each zone's requests
 * are counted in exactly one place.
 *
 * Memory: as limit_req, each new node first removes up to two idle ones
 * (untouched for a minute, leaked empty); when the zone is full it removes the
 * least recently used by force, and, where limit_req gives up after one,
 * goes on with the next ones (FERRYMAN_LIMIT_EVICT) until the node fits,
 * since slab pages are freed only when all their chunks are. Only a zone
 * smaller than one node, or whose every node is in use by a request being
 * decided this very moment, is still full: then, as limit_req, the request is
 * refused with rejectCode (passed in a dry run), and logged at "alert".
 *
 * Files: this one holds the decisions; ngx_http_ferryman_limit_zone.c the
 * zone, ngx_http_ferryman_limit_key.c the keys.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_limit.h"
#include "ngx_http_ferryman_limit_state.h"


/* limit_req's $limit_req_status values (r->main->limit_req_status). */
#define FERRYMAN_LIMIT_PASSED            1
#define FERRYMAN_LIMIT_DELAYED           2
#define FERRYMAN_LIMIT_REJECTED          3
#define FERRYMAN_LIMIT_DELAYED_DRY_RUN   4
#define FERRYMAN_LIMIT_REJECTED_DRY_RUN  5

/* Least recently used nodes removed by force for one new node at most. */
#define FERRYMAN_LIMIT_EVICT       64


/* Decisions: limit_req's, called with the zone locked. */

static ngx_int_t
ferryman_limit_leak(ngx_int_t excess, ngx_int_t rate, ngx_msec_int_t ms)
{
    /* excess - rate * ms / 1000, without overflow: a leak larger than any
     * excess empties the bucket. */
    if (ms > 0 && rate > NGX_MAX_INT_T_VALUE / ms) {
        return 0;
    }

    return excess - rate * ms / 1000;
}


static void
ferryman_limit_expire(ferryman_limit_shctx_t *sh, ngx_slab_pool_t *shpool,
    ngx_uint_t n)
{
    ngx_msec_t              now;
    ngx_queue_t            *q;
    ngx_msec_int_t          ms;
    ngx_rbtree_node_t      *node;
    ferryman_limit_node_t  *ln;

    now = ngx_current_msec;

    /* n == 1: removes one or two idle nodes; n == 0: the least recently
     * used by force, then one or two idle ones. */
    while (n < 3) {

        if (ngx_queue_empty(&sh->queue)) {
            return;
        }

        q = ngx_queue_last(&sh->queue);
        ln = ngx_queue_data(q, ferryman_limit_node_t, queue);

        if (ln->count) {
            /* Nodes are moved to the head on look-up: no older one is idle. */
            return;
        }

        if (n++ != 0) {
            ms = (ngx_msec_int_t) (now - ln->last);
            ms = ngx_abs(ms);

            if (ms < 60000) {
                return;
            }

            if (ferryman_limit_leak(ln->excess, ln->rate, ms) > 0) {
                return;
            }
        }

        ngx_queue_remove(q);

        node = (ngx_rbtree_node_t *)
                   ((u_char *) ln - offsetof(ngx_rbtree_node_t, color));

        ngx_rbtree_delete(&sh->rbtree, node);
        ngx_slab_free_locked(shpool, node);
    }
}


static ngx_int_t
ferryman_limit_excess(ferryman_limit_node_t *ln, ngx_int_t rate,
    ngx_msec_t now, ngx_msec_int_t *elapsed)
{
    ngx_int_t       excess;
    ngx_msec_int_t  ms;

    ms = (ngx_msec_int_t) (now - ln->last);

    if (ms < -60000) {
        ms = 1;

    } else if (ms < 0) {
        ms = 0;
    }

    excess = ferryman_limit_leak(ln->excess, rate, ms) + 1000;

    *elapsed = ms;

    return excess < 0 ? 0 : excess;
}


/* ngx_http_limit_req_lookup: NGX_OK (counted), NGX_AGAIN (held, counted by
 * ferryman_limit_account), NGX_BUSY (over burst), NGX_ERROR (no memory). */
static ngx_int_t
ferryman_limit_lookup(ferryman_limit_t *limit, uint32_t hash, ngx_str_t *key,
    ngx_int_t *ep, ngx_uint_t account, ferryman_limit_node_t **held)
{
    size_t                   size;
    ngx_int_t                rc, excess;
    ngx_uint_t               i;
    ngx_msec_t               now;
    ngx_msec_int_t           ms;
    ngx_slab_pool_t         *shpool;
    ngx_rbtree_node_t       *node, *sentinel;
    ferryman_limit_node_t   *ln;
    ferryman_limit_shctx_t  *sh;

    now = ngx_current_msec;

    sh = ferryman_limit_zone->data;
    shpool = (ngx_slab_pool_t *) ferryman_limit_zone->shm.addr;

    node = sh->rbtree.root;
    sentinel = sh->rbtree.sentinel;

    while (node != sentinel) {

        if (hash < node->key) {
            node = node->left;
            continue;
        }

        if (hash > node->key) {
            node = node->right;
            continue;
        }

        ln = (ferryman_limit_node_t *) &node->color;

        rc = ngx_memn2cmp(key->data, ln->data, key->len, (size_t) ln->len);

        if (rc == 0) {
            ngx_queue_remove(&ln->queue);
            ngx_queue_insert_head(&sh->queue, &ln->queue);

            excess = ferryman_limit_excess(ln, limit->rate, now, &ms);

            *ep = excess;

            if (excess > limit->burst) {
                return NGX_BUSY;
            }

            if (account) {
                ln->excess = excess;
                ln->rate = limit->rate;

                if (ms) {
                    ln->last = now;
                }

                return NGX_OK;
            }

            ln->count++;
            *held = ln;

            return NGX_AGAIN;
        }

        node = (rc < 0) ? node->left : node->right;
    }

    *ep = 0;

    size = offsetof(ngx_rbtree_node_t, color)
           + offsetof(ferryman_limit_node_t, data)
           + key->len;

    ferryman_limit_expire(sh, shpool, 1);

    node = ngx_slab_alloc_locked(shpool, size);

    for (i = 0; node == NULL && i < FERRYMAN_LIMIT_EVICT; i++) {
        if (ngx_queue_empty(&sh->queue)) {
            break;
        }

        ferryman_limit_expire(sh, shpool, 0);
        node = ngx_slab_alloc_locked(shpool, size);
    }

    if (node == NULL) {
        ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, 0,
                      "could not allocate node%s", shpool->log_ctx);
        return NGX_ERROR;
    }

    node->key = hash;

    ln = (ferryman_limit_node_t *) &node->color;

    ln->len = (uint32_t) key->len;
    ln->excess = 0;
    ln->rate = limit->rate;

    ngx_memcpy(ln->data, key->data, key->len);

    ngx_rbtree_insert(&sh->rbtree, node);
    ngx_queue_insert_head(&sh->queue, &ln->queue);

    if (account) {
        ln->last = now;
        ln->count = 0;
        return NGX_OK;
    }

    ln->last = 0;
    ln->count = 1;
    *held = ln;

    return NGX_AGAIN;
}


/* ngx_http_limit_req_account: counts the held limits before the n-th; the
 * longest delay, its excess in *ep and its limit in *limit. */
static ngx_msec_t
ferryman_limit_account(ferryman_limits_t *lim, ngx_uint_t n,
    ferryman_limit_node_t **held, ngx_int_t *ep, ferryman_limit_t **limit)
{
    ngx_int_t               excess;
    ngx_msec_t              now, delay, max_delay;
    ngx_msec_int_t          ms;
    ngx_slab_pool_t        *shpool;
    ferryman_limit_node_t  *ln;

    excess = *ep;

    if (excess <= (*limit)->delay) {
        max_delay = 0;

    } else {
        max_delay = (ngx_msec_t) ((excess - (*limit)->delay) * 1000
                                  / (*limit)->rate);
    }

    shpool = (ngx_slab_pool_t *) ferryman_limit_zone->shm.addr;

    while (n--) {
        ln = held[n];

        if (ln == NULL) {
            continue;
        }

        ngx_shmtx_lock(&shpool->mutex);

        now = ngx_current_msec;
        excess = ferryman_limit_excess(ln, lim->limits[n].rate, now, &ms);

        if (ms) {
            ln->last = now;
        }

        ln->excess = excess;
        ln->rate = lim->limits[n].rate;
        ln->count--;

        ngx_shmtx_unlock(&shpool->mutex);

        held[n] = NULL;

        if (excess <= lim->limits[n].delay) {
            continue;
        }

        delay = (ngx_msec_t) ((excess - lim->limits[n].delay) * 1000
                              / lim->limits[n].rate);

        if (delay > max_delay) {
            max_delay = delay;
            *ep = excess;
            *limit = &lim->limits[n];
        }
    }

    return max_delay;
}


static void
ferryman_limit_unlock(ferryman_limit_node_t **held, ngx_uint_t n)
{
    ngx_slab_pool_t  *shpool;

    shpool = (ngx_slab_pool_t *) ferryman_limit_zone->shm.addr;

    while (n--) {
        if (held[n] == NULL) {
            continue;
        }

        ngx_shmtx_lock(&shpool->mutex);
        held[n]->count--;
        ngx_shmtx_unlock(&shpool->mutex);

        held[n] = NULL;
    }
}


/* limit_req's delay_log_level: one level lower, "info" stays "info". */
static ngx_uint_t
ferryman_limit_delay_level(ngx_uint_t level)
{
    return level == NGX_LOG_INFO ? NGX_LOG_INFO : level + 1;
}


ngx_int_t
ferryman_limit_check(ngx_http_request_t *r, ferryman_limits_t *lim,
    ngx_msec_t *delay)
{
    size_t                   len;
    uint32_t                 hash;
    ngx_str_t                key;
    ngx_int_t                rc, excess;
    ngx_uint_t               n;
    ngx_slab_pool_t         *shpool;
    ferryman_limit_t        *limit;
    ferryman_limit_node_t   *few[FERRYMAN_LIMIT_FEW], **held;

    *delay = 0;

    if (r->main->limit_req_status) {
        /* Decided already (a request routed again after an internal
         * redirect): counted once, as limit_req counts it. */
        return NGX_DECLINED;
    }

    if (ferryman_limit_zone == NULL || ferryman_limit_zone->data == NULL) {
        return NGX_ERROR;
    }

    held = few;

    if (lim->nlimits > FERRYMAN_LIMIT_FEW) {
        held = ngx_pcalloc(r->pool,
                           lim->nlimits * sizeof(ferryman_limit_node_t *));
        if (held == NULL) {
            return NGX_ERROR;
        }

    } else {
        ngx_memzero(few, sizeof(few));
    }

    shpool = (ngx_slab_pool_t *) ferryman_limit_zone->shm.addr;
    excess = 0;
    rc = NGX_DECLINED;
    limit = NULL;

    for (n = 0; n < lim->nlimits; n++) {
        limit = &lim->limits[n];

        if (ferryman_limit_key(r, limit, &key, &len) != NGX_OK) {
            ferryman_limit_unlock(held, n);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        if (len == 0) {
            continue;
        }

        if (len > FERRYMAN_LIMIT_MAX_KEY) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "the value of the key of zone \"%V\" "
                          "is more than 65535 bytes", &limit->log_name);
            continue;
        }

        hash = ngx_crc32_short(key.data, key.len);

        ngx_shmtx_lock(&shpool->mutex);

        rc = ferryman_limit_lookup(limit, hash, &key, &excess,
                                   n == lim->nlimits - 1, &held[n]);

        ngx_shmtx_unlock(&shpool->mutex);

        if (rc != NGX_AGAIN) {
            break;
        }
    }

    if (rc == NGX_DECLINED) {
        return NGX_DECLINED;
    }

    if (rc == NGX_BUSY || rc == NGX_ERROR) {

        if (rc == NGX_BUSY) {
            ngx_log_error(lim->log_level, r->connection->log, 0,
                          "limiting requests%s, excess: %i.%03i by zone \"%V\"",
                          lim->dry_run ? ", dry run" : "",
                          excess / 1000, excess % 1000, &limit->log_name);
        }

        ferryman_limit_unlock(held, n);

        if (lim->dry_run) {
            r->main->limit_req_status = FERRYMAN_LIMIT_REJECTED_DRY_RUN;
            return NGX_DECLINED;
        }

        r->main->limit_req_status = FERRYMAN_LIMIT_REJECTED;

        return lim->status;
    }

    /* rc == NGX_AGAIN || rc == NGX_OK */

    if (rc == NGX_AGAIN) {
        excess = 0;
    }

    *delay = ferryman_limit_account(lim, n, held, &excess, &limit);

    if (*delay == 0) {
        r->main->limit_req_status = FERRYMAN_LIMIT_PASSED;
        return NGX_DECLINED;
    }

    ngx_log_error(ferryman_limit_delay_level(lim->log_level),
                  r->connection->log, 0,
                  "delaying request%s, excess: %i.%03i, by zone \"%V\"",
                  lim->dry_run ? ", dry run" : "",
                  excess / 1000, excess % 1000, &limit->log_name);

    if (lim->dry_run) {
        *delay = 0;
        r->main->limit_req_status = FERRYMAN_LIMIT_DELAYED_DRY_RUN;
        return NGX_DECLINED;
    }

    r->main->limit_req_status = FERRYMAN_LIMIT_DELAYED;

    return NGX_DECLINED;
}


/* Waiting: limit_req's. */

static void
ferryman_limit_delayed(ngx_http_request_t *r)
{
    ngx_event_t  *wev;

    wev = r->connection->write;

    if (wev->delayed) {

        if (ngx_handle_write_event(wev, 0) != NGX_OK) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        }

        return;
    }

    if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    r->read_event_handler = ngx_http_block_reading;
    r->write_event_handler = ngx_http_core_run_phases;

    ngx_http_core_run_phases(r);
}


ngx_int_t
ferryman_limit_wait(ngx_http_request_t *r, ngx_msec_t delay)
{
    if (r->connection->read->ready) {
        ngx_post_event(r->connection->read, &ngx_posted_events);

    } else {
        if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ferryman_limit_delayed;

    r->connection->write->delayed = 1;
    ngx_add_timer(r->connection->write, delay);

    return NGX_AGAIN;
}

