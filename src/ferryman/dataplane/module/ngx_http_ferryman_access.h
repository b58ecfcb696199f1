/*
 * accessControl Policies of VirtualServer routes the module serves (NIC's
 * allow/deny lists): ngx_http_ferryman_access.c.
 */

#ifndef _NGX_HTTP_FERRYMAN_ACCESS_H_INCLUDED_
#define _NGX_HTTP_FERRYMAN_ACCESS_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>


/* One network, masked when the record is decoded: an address matches when
 * (address & mask) == net in each of its words (1 for IPv4, 4 for IPv6),
 * all in network byte order. */
typedef struct {
    uint32_t                net[4];
    uint32_t                mask[4];
    ngx_uint_t              words;       /* 1: IPv4, 4: IPv6 */
} ferryman_access_net_t;


/* NIC's "allow <net>; ... deny all;" (allow set) or "deny <net>; ...
 * allow all;": the first network holding the client decides, else "all". */
typedef struct {
    ferryman_access_net_t  *nets;
    ngx_uint_t              nnets;
    unsigned                allow:1;
} ferryman_access_t;


/* NGX_OK (let through) or NGX_HTTP_FORBIDDEN. */
ngx_int_t ferryman_access_check(ngx_http_request_t *r, ferryman_access_t *a);


#endif /* _NGX_HTTP_FERRYMAN_ACCESS_H_INCLUDED_ */
