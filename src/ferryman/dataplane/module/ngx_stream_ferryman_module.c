/*
 * ngx_stream_ferryman_module: TransportServers' balancer, fed by records.
 *
 * Why: a stream `upstream` block lists its servers in nginx.conf, so every
 * endpoint change of a TCP/UDP backend would reload NGINX, and Debian has no
 * stream Lua module to balance otherwise. This module picks each session's
 * peer from the records ferryman pushes into ngx_http_ferryman_module's zone,
 * the same push that carries HTTP hosts:
 *
 *   S:<listener>         a TCP/UDP listener's TransportServer
 *   S:<listener>/<host>  a TLS passthrough host (the client's SNI)
 *   E:<backend>          the endpoint set, "<addr>#<port> ..."
 *
 * An S record is "<backend> <method> <max_fails> <fail_timeout ms>
 * <max_conns> <tries> <next_upstream 0|1> <next_upstream_timeout ms>
 * [<backup backend>]" (ferryman.configs.transportserver writes it); method is
 * rr, lc, random, random2 or random2lc. Failures and open connections are
 * counted per peer in the zone (all workers agree), through the functions
 * ngx_http_ferryman_module exports (ngx_ferryman_stream_api.h): this module
 * is a separate .so, loaded after that one, and only where nginx.conf has a
 * stream block.
 *
 * What a balancer cannot set stays in the server block (connect and session
 * timeouts, UDP request and response counts): changing those reloads.
 *
 * Passthrough: a server with `ferryman_stream_sni_fallback ADDRESS` reads
 * the SNI (ssl_preread); a host no record names goes to ADDRESS, ferryman's
 * own HTTPS listener, with the PROXY protocol so that it sees the client's
 * address (the balancer turns it on for that peer only).
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_stream.h>

#include "ngx_ferryman_stream_api.h"


#define FERRYMAN_STREAM_MAX_KEY  1024

enum {
    FERRYMAN_RR = 0,
    FERRYMAN_LC,
    FERRYMAN_RANDOM,
    FERRYMAN_RANDOM2,
    FERRYMAN_RANDOM2_LC
};


typedef struct {
    ngx_str_t                 listener;
    ngx_int_t                 sni_index;    /* NGX_ERROR: no SNI key */
    ngx_addr_t               *fallback;
    ngx_flag_t                terminate;    /* TLS ends here: SNI, then no host */
} ngx_stream_ferryman_srv_conf_t;


typedef struct {
    struct sockaddr          *sockaddr;
    socklen_t                 socklen;
    ngx_str_t                 name;
    uint32_t                  hash;
} ferryman_stream_peer_t;


typedef struct {
    ngx_stream_session_t     *session;
    ferryman_stream_peer_t   *peers;
    ngx_uint_t                npeers;       /* primary, then backup */
    ngx_uint_t                nprimary;
    uint32_t                  slot;
    ngx_uint_t                method;
    ngx_uint_t                max_fails;
    ngx_msec_t                fail_timeout;
    ngx_uint_t                max_conns;
    ngx_uint_t                next_upstream;
    ngx_msec_t                next_upstream_timeout;
    ngx_msec_t                started;
    ferryman_stream_peer_t   *current;
    ngx_uint_t                counted;
    ngx_addr_t               *fallback;     /* passthrough: not a TS host */
    uint64_t                 *tried;
} ferryman_stream_ctx_t;


static void *ngx_stream_ferryman_create_srv_conf(ngx_conf_t *cf);
static char *ngx_stream_ferryman_merge_srv_conf(ngx_conf_t *cf, void *parent,
    void *child);
static char *ngx_stream_ferryman(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_stream_ferryman_fallback(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_stream_ferryman_sni(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_stream_ferryman_add_variables(ngx_conf_t *cf);


static ngx_command_t  ngx_stream_ferryman_commands[] = {

    { ngx_string("ferryman_stream"),
      NGX_STREAM_UPS_CONF|NGX_CONF_NOARGS,
      ngx_stream_ferryman,
      0,
      0,
      NULL },

    { ngx_string("ferryman_stream_listener"),
      NGX_STREAM_SRV_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_STREAM_SRV_CONF_OFFSET,
      offsetof(ngx_stream_ferryman_srv_conf_t, listener),
      NULL },

    { ngx_string("ferryman_stream_sni_fallback"),
      NGX_STREAM_SRV_CONF|NGX_CONF_TAKE1,
      ngx_stream_ferryman_fallback,
      NGX_STREAM_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("ferryman_stream_sni"),
      NGX_STREAM_SRV_CONF|NGX_CONF_NOARGS,
      ngx_stream_ferryman_sni,
      NGX_STREAM_SRV_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_stream_module_t  ngx_stream_ferryman_module_ctx = {
    ngx_stream_ferryman_add_variables,     /* preconfiguration */
    NULL,                                  /* postconfiguration */
    NULL,                                  /* create main configuration */
    NULL,                                  /* init main configuration */
    ngx_stream_ferryman_create_srv_conf,   /* create server configuration */
    ngx_stream_ferryman_merge_srv_conf     /* merge server configuration */
};


ngx_module_t  ngx_stream_ferryman_module = {
    NGX_MODULE_V1,
    &ngx_stream_ferryman_module_ctx,       /* module context */
    ngx_stream_ferryman_commands,          /* module directives */
    NGX_STREAM_MODULE,                     /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    NULL,                                  /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    NULL,                                  /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_int_t
ferryman_stream_field(u_char **pos, u_char *end, ngx_str_t *field)
{
    u_char  *p;

    p = *pos;

    while (p < end && *p == ' ') {
        p++;
    }

    if (p == end) {
        return NGX_DONE;
    }

    field->data = p;

    while (p < end && *p != ' ') {
        p++;
    }

    field->len = p - field->data;
    *pos = p;

    return NGX_OK;
}


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
    u_char                  *pos, *end, *hash, buf[FERRYMAN_STREAM_MAX_KEY];
    size_t                   n;
    ngx_int_t                port;
    ngx_str_t                key, value, field;
    ngx_uint_t               count;
    ngx_addr_t               addr;
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

    count = 1;
    for (n = 0; n < value.len; n++) {
        if (value.data[n] == ' ') {
            count++;
        }
    }

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

    while (ferryman_stream_field(&pos, end, &field) == NGX_OK) {

        hash = NULL;
        for (n = field.len; n > 0; n--) {
            if (field.data[n - 1] == '#') {
                hash = field.data + n - 1;
                break;
            }
        }

        if (hash == NULL) {
            continue;
        }

        port = ngx_atoi(hash + 1, field.data + field.len - hash - 1);
        if (port < 1 || port > 65535) {
            continue;
        }

        if (ngx_parse_addr(pool, &addr, field.data, hash - field.data)
            != NGX_OK)
        {
            continue;
        }

        ngx_inet_set_port(addr.sockaddr, (in_port_t) port);

        peer = &peers[ctx->npeers++];
        peer->sockaddr = addr.sockaddr;
        peer->socklen = addr.socklen;
        peer->name.data = ngx_pnalloc(pool, NGX_SOCKADDR_STRLEN);
        if (peer->name.data == NULL) {
            return NGX_ERROR;
        }

        peer->name.len = ngx_sock_ntop(addr.sockaddr, addr.socklen,
                                       peer->name.data, NGX_SOCKADDR_STRLEN,
                                       1);
        peer->hash = ngx_crc32_short(peer->name.data, peer->name.len);
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
ferryman_stream_key(ngx_stream_session_t *s,
    ngx_stream_ferryman_srv_conf_t *conf, ngx_str_t *key, u_char *buf)
{
    u_char                       *p;
    size_t                        len;
    ngx_stream_variable_value_t  *sni;

    len = 2 + conf->listener.len;

    sni = NULL;
    if (conf->sni_index != NGX_ERROR) {
        sni = ngx_stream_get_indexed_variable(s, conf->sni_index);
        if (sni == NULL || sni->not_found || sni->len == 0) {
            return NGX_DECLINED;
        }
        len += 1 + sni->len;
    }

    if (len > FERRYMAN_STREAM_MAX_KEY) {
        return NGX_DECLINED;
    }

    p = ngx_cpymem(buf, "S:", 2);
    p = ngx_cpymem(p, conf->listener.data, conf->listener.len);

    if (sni != NULL) {
        *p++ = '/';
        /* Host names are matched lowercase, as ferryman writes them. */
        ngx_strlow(p, sni->data, sni->len);
        p += sni->len;
    }

    key->data = buf;
    key->len = p - buf;

    return NGX_OK;
}


/* For a wildcard passthrough host: the key of "a.b.c" becomes the key of
 * "*.b.c", in place ("*" takes the first label's place: never longer);
 * NGX_DECLINED when the name has no dot after its first label. */
static ngx_int_t
ferryman_stream_wildcard(ngx_stream_ferryman_srv_conf_t *conf, ngx_str_t *key)
{
    u_char  *name, *dot, *end;

    name = key->data + 2 + conf->listener.len + 1;
    end = key->data + key->len;
    dot = ngx_strlchr(name, end, '.');

    if (dot == NULL || dot == name || dot + 1 == end) {
        return NGX_DECLINED;
    }

    name[0] = '*';
    ngx_memmove(name + 1, dot, end - dot);
    key->len = (name + 1 + (end - dot)) - key->data;

    return NGX_OK;
}


static ngx_int_t
ferryman_stream_init_peer(ngx_stream_session_t *s,
    ngx_stream_upstream_srv_conf_t *us)
{
    u_char                           buf[FERRYMAN_STREAM_MAX_KEY], *pos, *end;
    uint32_t                         slot, unused;
    ngx_int_t                        rc;
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
    u->peer.data = ctx;
    u->peer.tries = 1;

    value.len = 0;
    rc = ferryman_stream_key(s, conf, &key, buf);

    if (rc == NGX_OK
        && ngx_ferryman_stream_record(&key, pool, &value, &unused) == NGX_ERROR)
    {
        return NGX_ERROR;
    }

    if (rc == NGX_OK && value.len == 0 && conf->sni_index != NGX_ERROR
        && ferryman_stream_wildcard(conf, &key) == NGX_OK
        && ngx_ferryman_stream_record(&key, pool, &value, &unused) == NGX_ERROR)
    {
        return NGX_ERROR;
    }

    if (value.len == 0 && conf->terminate) {
        /* A TransportServer without a host holds the listener itself. */
        key.data = buf;
        key.len = ngx_cpymem(ngx_cpymem(buf, "S:", 2), conf->listener.data,
                             conf->listener.len) - buf;

        if (ngx_ferryman_stream_record(&key, pool, &value, &unused)
            == NGX_ERROR)
        {
            return NGX_ERROR;
        }
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
        if (ferryman_stream_field(&pos, end, &f[n]) != NGX_OK) {
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


static ngx_int_t
ferryman_stream_init_upstream(ngx_conf_t *cf,
    ngx_stream_upstream_srv_conf_t *us)
{
    us->peer.init = ferryman_stream_init_peer;

    return NGX_OK;
}


static void *
ngx_stream_ferryman_create_srv_conf(ngx_conf_t *cf)
{
    ngx_stream_ferryman_srv_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_stream_ferryman_srv_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    conf->sni_index = NGX_CONF_UNSET;
    conf->fallback = NGX_CONF_UNSET_PTR;
    conf->terminate = NGX_CONF_UNSET;

    return conf;
}


static char *
ngx_stream_ferryman_merge_srv_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_stream_ferryman_srv_conf_t  *prev = parent;
    ngx_stream_ferryman_srv_conf_t  *conf = child;

    ngx_conf_merge_str_value(conf->listener, prev->listener, "");

    if (conf->sni_index == NGX_CONF_UNSET) {
        conf->sni_index = prev->sni_index == NGX_CONF_UNSET
                          ? NGX_ERROR : prev->sni_index;
    }

    ngx_conf_merge_ptr_value(conf->fallback, prev->fallback, NULL);
    ngx_conf_merge_value(conf->terminate, prev->terminate, 0);

    return NGX_CONF_OK;
}


static char *
ngx_stream_ferryman(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_stream_upstream_srv_conf_t  *uscf;

    uscf = ngx_stream_conf_get_module_srv_conf(cf, ngx_stream_upstream_module);

    if (uscf->peer.init_upstream) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "load balancing method redefined");
    }

    uscf->peer.init_upstream = ferryman_stream_init_upstream;

    return NGX_CONF_OK;
}


static char *
ngx_stream_ferryman_fallback(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_stream_ferryman_srv_conf_t  *fcf = conf;

    ngx_str_t   *value;
    ngx_url_t    url;

    static ngx_str_t  sni = ngx_string("ssl_preread_server_name");

    value = cf->args->elts;

    ngx_memzero(&url, sizeof(ngx_url_t));
    url.url = value[1];
    url.no_resolve = 1;

    if (ngx_parse_url(cf->pool, &url) != NGX_OK || url.naddrs == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid address \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    fcf->fallback = &url.addrs[0];
    fcf->sni_index = ngx_stream_get_variable_index(cf, &sni);

    if (fcf->sni_index == NGX_ERROR) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_stream_ferryman_sni(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_stream_ferryman_srv_conf_t  *fcf = conf;

    static ngx_str_t  sni = ngx_string("ssl_server_name");

    fcf->terminate = 1;
    fcf->sni_index = ngx_stream_get_variable_index(cf, &sni);

    if (fcf->sni_index == NGX_ERROR) {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * $ferryman_stream_certificate, $ferryman_stream_certificate_key (PEM): for
 * `ssl_certificate data:$ferryman_stream_certificate` in a server whose
 * TransportServers end TLS. The record "T:<listener>/<host>" (or
 * "T:<listener>" for one without a host) is "<base64 chain> <base64 key>"
 * (ferryman.configs.transportserver); the name is the client's SNI, then its
 * one-label wildcard, then none. No record: empty, and the handshake fails.
 */
static ngx_int_t
ferryman_stream_certificate(ngx_stream_session_t *s,
    ngx_stream_variable_value_t *v, uintptr_t data)
{
    u_char                          *p, *pos, *end, buf[FERRYMAN_STREAM_MAX_KEY];
    size_t                           len;
    uint32_t                         unused;
    ngx_str_t                        key, value, field, decoded;
    ngx_uint_t                       i;
    ngx_pool_t                      *pool;
    const char                      *name;
    ngx_stream_ferryman_srv_conf_t  *conf;

    v->not_found = 1;
    conf = ngx_stream_get_module_srv_conf(s, ngx_stream_ferryman_module);
    pool = s->connection->pool;
    name = NULL;

#if (NGX_STREAM_SSL && defined SSL_CTRL_SET_TLSEXT_HOSTNAME)
    if (s->connection->ssl != NULL) {
        name = SSL_get_servername(s->connection->ssl->connection,
                                  TLSEXT_NAMETYPE_host_name);
    }
#endif

    if (conf->listener.len == 0) {
        return NGX_OK;
    }

    len = name ? ngx_strlen(name) : 0;
    value.len = 0;

    if (len && 2 + conf->listener.len + 1 + len <= FERRYMAN_STREAM_MAX_KEY) {
        p = ngx_cpymem(buf, "T:", 2);
        p = ngx_cpymem(p, conf->listener.data, conf->listener.len);
        *p++ = '/';
        ngx_strlow(p, (u_char *) name, len);
        key.data = buf;
        key.len = p + len - buf;

        if (ngx_ferryman_stream_record(&key, pool, &value, &unused)
            == NGX_ERROR)
        {
            return NGX_ERROR;
        }

        if (value.len == 0 && ferryman_stream_wildcard(conf, &key) == NGX_OK
            && ngx_ferryman_stream_record(&key, pool, &value, &unused)
               == NGX_ERROR)
        {
            return NGX_ERROR;
        }
    }

    if (value.len == 0) {
        key.data = buf;
        key.len = ngx_cpymem(ngx_cpymem(buf, "T:", 2), conf->listener.data,
                             conf->listener.len) - buf;

        if (ngx_ferryman_stream_record(&key, pool, &value, &unused)
            == NGX_ERROR)
        {
            return NGX_ERROR;
        }
    }

    pos = value.data;
    end = pos + value.len;

    for (i = 0; i <= data; i++) {
        if (ferryman_stream_field(&pos, end, &field) != NGX_OK) {
            return NGX_OK;
        }
    }

    decoded.data = ngx_pnalloc(pool, ngx_base64_decoded_length(field.len));
    if (decoded.data == NULL) {
        return NGX_ERROR;
    }

    if (ngx_decode_base64(&decoded, &field) != NGX_OK) {
        return NGX_OK;
    }

    v->data = decoded.data;
    v->len = decoded.len;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    return NGX_OK;
}


static ngx_int_t
ngx_stream_ferryman_add_variables(ngx_conf_t *cf)
{
    ngx_stream_variable_t  *var;

    static ngx_str_t  names[] = {
        ngx_string("ferryman_stream_certificate"),
        ngx_string("ferryman_stream_certificate_key")
    };

    ngx_uint_t  i;

    for (i = 0; i < 2; i++) {
        var = ngx_stream_add_variable(cf, &names[i], NGX_STREAM_VAR_NOCACHEABLE);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = ferryman_stream_certificate;
        var->data = i;
    }

    return NGX_OK;
}
