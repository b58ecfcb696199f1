/*
 * Requests in flight per peer, over all workers (see FERRYMAN_FLIGHT_BUCKETS
 * in ngx_http_ferryman.h): counted from the balancer's get to its free and
 * read by ferryman.lua (ngx_http_ferryman_in_flight), so that "no request
 * to this peer is left" is a measurement a drain can wait for.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman.h"
#include "ngx_ferryman_fields.h"


/* A peer's tag in its in-flight bucket: a hash independent of the CRC that
 * chose the bucket, in the slot word's upper half. */
ngx_atomic_uint_t
ferryman_flight_tag(u_char *name, size_t len)
{
    return ((ngx_atomic_uint_t) ngx_murmur_hash2(name, len)
            & FERRYMAN_FLIGHT_COUNT) << FERRYMAN_FLIGHT_SHIFT;
}


/* Counts one attempt at a peer; returns the slot its free must uncount. */
ngx_atomic_t *
ferryman_flight_enter(ferryman_shctx_t *sh, uint32_t hash,
    ngx_atomic_uint_t tag)
{
    ngx_uint_t          i, free;
    ngx_atomic_t       *bucket;
    ngx_atomic_uint_t   word;

    bucket = sh->flight[hash % FERRYMAN_FLIGHT_BUCKETS];

    for ( ;; ) {
        free = FERRYMAN_FLIGHT_WAYS;

        for (i = 0; i < FERRYMAN_FLIGHT_WAYS; i++) {
            word = bucket[i];

            if ((word & ~FERRYMAN_FLIGHT_COUNT) == tag
                && (word & FERRYMAN_FLIGHT_COUNT) != FERRYMAN_FLIGHT_COUNT)
            {
                if (ngx_atomic_cmp_set(&bucket[i], word, word + 1)) {
                    return &bucket[i];
                }

                break;  /* another worker moved it: look again */
            }

            if ((word & FERRYMAN_FLIGHT_COUNT) == 0
                && free == FERRYMAN_FLIGHT_WAYS)
            {
                free = i;
            }
        }

        if (i < FERRYMAN_FLIGHT_WAYS) {
            continue;
        }

        if (free == FERRYMAN_FLIGHT_WAYS) {
            (void) ngx_atomic_fetch_add(&sh->flight_spilled, 1);
            return &sh->flight_spilled;
        }

        word = bucket[free];

        if ((word & FERRYMAN_FLIGHT_COUNT) == 0
            && ngx_atomic_cmp_set(&bucket[free], word, tag | 1))
        {
            return &bucket[free];
        }
    }
}


/* Requests in flight to a peer now: its slots, plus the spilled ones. A
 * request counted during the whole reading is in it: its slot does not move. */
static uint64_t
ferryman_flight_count(ferryman_shctx_t *sh, uint32_t hash,
    ngx_atomic_uint_t tag)
{
    uint64_t            count;
    ngx_uint_t          i;
    ngx_atomic_t       *bucket;
    ngx_atomic_uint_t   word;

    bucket = sh->flight[hash % FERRYMAN_FLIGHT_BUCKETS];
    count = sh->flight_spilled;

    for (i = 0; i < FERRYMAN_FLIGHT_WAYS; i++) {
        word = bucket[i];

        if ((word & ~FERRYMAN_FLIGHT_COUNT) == tag) {
            count += word & FERRYMAN_FLIGHT_COUNT;
        }
    }

    return count;
}


/* "<addr>#<port>" (an endpoint record's peer, the IPv6 address unbracketed)
 * as a socket address, read as ngx_ferryman_peer() reads it, without a
 * pool. */
static ngx_int_t
ferryman_peer_address(u_char *text, size_t len, ngx_sockaddr_t *sa,
    socklen_t *socklen)
{
    u_char           *hash;
    in_addr_t         inaddr;
    ngx_int_t         port;
#if (NGX_HAVE_INET6)
    struct in6_addr   inaddr6;
#endif

    port = ngx_ferryman_peer_port(text, len, &hash);
    if (port == NGX_DECLINED) {
        return NGX_DECLINED;
    }

    ngx_memzero(sa, sizeof(ngx_sockaddr_t));

    inaddr = ngx_inet_addr(text, hash - text);

    if (inaddr != INADDR_NONE) {
        sa->sockaddr_in.sin_family = AF_INET;
        sa->sockaddr_in.sin_addr.s_addr = inaddr;
        *socklen = sizeof(struct sockaddr_in);

#if (NGX_HAVE_INET6)
    } else if (ngx_inet6_addr(text, hash - text, inaddr6.s6_addr) == NGX_OK) {
        sa->sockaddr_in6.sin6_family = AF_INET6;
        sa->sockaddr_in6.sin6_addr = inaddr6;
        *socklen = sizeof(struct sockaddr_in6);
#endif

    } else {
        return NGX_DECLINED;
    }

    ngx_inet_set_port(&sa->sockaddr, (in_port_t) port);

    return NGX_OK;
}


/* Requests in flight to a peer now, over all workers: the fast path's
 * attempts at it whose free has not come yet. peer: "<addr>#<port>" as in
 * endpoint records; its name as $upstream_addr writes it goes to name
 * (NGX_SOCKADDR_STRLEN bytes), the name's length to *name_len. */
int
ngx_http_ferryman_in_flight(const u_char *peer, size_t len, u_char *name,
    size_t *name_len, uint64_t *count)
{
    socklen_t          socklen;
    ngx_sockaddr_t     sa;
    ferryman_shctx_t  *sh;

    sh = ferryman_shared();
    if (sh == NULL) {
        return FERRYMAN_NO_ZONE;
    }

    if (ferryman_peer_address((u_char *) peer, len, &sa, &socklen) != NGX_OK) {
        return FERRYMAN_BAD_KEY;
    }

    *name_len = ngx_sock_ntop(&sa.sockaddr, socklen, name, NGX_SOCKADDR_STRLEN,
                              1);
    *count = ferryman_flight_count(sh, ngx_crc32_short(name, *name_len),
                                   ferryman_flight_tag(name, *name_len));

    return FERRYMAN_OK;
}
