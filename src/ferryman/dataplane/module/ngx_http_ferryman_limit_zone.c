/*
 * The rate limits' shared zone, "ferryman_fast_limits": configured by
 * ferryman_limit_zone, else added at its default size wherever the fast
 * zone is; a node per (NIC zone, key), in a red-black tree by CRC32 and a
 * queue in least recently used order (ngx_http_ferryman_limit.c).
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_limit.h"
#include "ngx_http_ferryman_limit_state.h"
#include "ngx_http_ferryman_shm.h"


/* The size of the zone without ferryman_limit_zone: the Lua dict's (a node
 * is 128 bytes with an IPv4 key and a NIC zone name of ~30 bytes: ~250,000
 * keys). Pages never written take no memory. */
#define FERRYMAN_LIMIT_ZONE_SIZE   (32 * 1024 * 1024)


ngx_shm_zone_t  *ferryman_limit_zone;


/* Zone. */

static void
ferryman_limit_insert_value(ngx_rbtree_node_t *temp, ngx_rbtree_node_t *node,
    ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t      **p;
    ferryman_limit_node_t   *ln, *lt;

    for ( ;; ) {

        if (node->key < temp->key) {
            p = &temp->left;

        } else if (node->key > temp->key) {
            p = &temp->right;

        } else {
            ln = (ferryman_limit_node_t *) &node->color;
            lt = (ferryman_limit_node_t *) &temp->color;

            p = (ngx_memn2cmp(ln->data, lt->data, ln->len, lt->len) < 0)
                ? &temp->left : &temp->right;
        }

        if (*p == sentinel) {
            break;
        }

        temp = *p;
    }

    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}


static ngx_int_t
ferryman_limit_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    size_t                   len;
    ngx_slab_pool_t         *shpool;
    ferryman_limit_shctx_t  *sh;

    /* A reload keeps the buckets, as limit_req's do. */
    if (ngx_http_ferryman_shm_attach(shm_zone, data)) {
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
    sh = ngx_slab_alloc(shpool, sizeof(ferryman_limit_shctx_t));
    if (sh == NULL) {
        return NGX_ERROR;
    }

    ngx_rbtree_init(&sh->rbtree, &sh->sentinel, ferryman_limit_insert_value);
    ngx_queue_init(&sh->queue);

    len = sizeof(" in ferryman limit zone \"\"") + shm_zone->shm.name.len;

    shpool->log_ctx = ngx_slab_alloc(shpool, len);
    if (shpool->log_ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(shpool->log_ctx, " in ferryman limit zone \"%V\"%Z",
                &shm_zone->shm.name);

    /* A full zone is logged once per refused request, below. */
    shpool->log_nomem = 0;
    shpool->data = sh;
    shm_zone->data = sh;

    return NGX_OK;
}


static ngx_int_t
ferryman_limit_add_zone(ngx_conf_t *cf, ssize_t size, void *tag)
{
    static ngx_str_t  name = ngx_string("ferryman_fast_limits");

    ferryman_limit_zone = ngx_shared_memory_add(cf, &name, size, tag);
    if (ferryman_limit_zone == NULL) {
        return NGX_ERROR;
    }

    ferryman_limit_zone->init = ferryman_limit_init_zone;

    return NGX_OK;
}


char *
ferryman_limit_zone_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ssize_t     size;
    ngx_str_t  *value;

    value = cf->args->elts;

    if (ferryman_limit_zone != NULL) {
        return "is duplicate";
    }

    size = ngx_parse_size(&value[1]);

    if (size == NGX_ERROR || size < (ssize_t) (8 * ngx_pagesize)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone size \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    if (ferryman_limit_add_zone(cf, size, &ngx_http_ferryman_module)
        != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


void
ferryman_limit_preconfiguration(void)
{
    /* The module stays loaded across reloads: forget the last cycle's zone. */
    ferryman_limit_zone = NULL;
}


ngx_int_t
ferryman_limit_postconfiguration(ngx_conf_t *cf, void *tag)
{
    if (ferryman_limit_zone != NULL) {
        return NGX_OK;
    }

    return ferryman_limit_add_zone(cf, FERRYMAN_LIMIT_ZONE_SIZE, tag);
}
