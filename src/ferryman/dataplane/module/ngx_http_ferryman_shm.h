/*
 * What the module's two shared zones ("ferryman_fast",
 * ngx_http_ferryman_zone.c, and "ferryman_fast_limits",
 * ngx_http_ferryman_limit.c) do alike when NGINX initialises them.
 */

#ifndef _NGX_HTTP_FERRYMAN_SHM_H_INCLUDED_
#define _NGX_HTTP_FERRYMAN_SHM_H_INCLUDED_

#include <ngx_config.h>
#include <ngx_core.h>


/* Takes up the zone's state where it exists already: a reload's (data, the
 * old cycle's) or the one the master made (shm.exists, e.g. on Windows).
 * Returns whether it did; if not, the caller allocates the state, and sets
 * shpool->data and shm_zone->data to it. */
static ngx_inline ngx_uint_t
ngx_http_ferryman_shm_attach(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_slab_pool_t  *shpool;

    if (data) {
        /* A reload: the state stays. */
        shm_zone->data = data;
        return 1;
    }

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        shm_zone->data = shpool->data;
        return 1;
    }

    return 0;
}


#endif /* _NGX_HTTP_FERRYMAN_SHM_H_INCLUDED_ */
