/*
 * `ferryman_h2c_detect;` (server): HTTP/1.x and HTTP/2 with prior knowledge
 * (h2c, GRPCRoutes) on one plaintext socket, on NGINX before 1.25.1.
 *
 * Why: there, `listen ... http2` makes a plaintext socket HTTP/2 only (NGINX
 * 1.25.1 and later look at the first bytes themselves, with `http2 on`), so
 * Debian's 1.22 served the Gateway's plaintext sockets through a stream block
 * that read the first bytes ahead and proxied each connection to one of two
 * unix sockets (ngx_stream_ferryman_h2c_module): a second connection, the
 * PROXY protocol and ~40 us of NGINX's CPU per request. Here the HTTP server
 * listens on the socket itself, and a connection's first bytes pick its
 * protocol before NGINX's HTTP code sees it.
 *
 * How: at init_module (after the http block has made cycle->listening; in the
 * master, at start and on every reload), each HTTP listening socket whose
 * addresses' default servers all carry this directive and are plaintext
 * HTTP/1 (no ssl, http2 or proxy_protocol) gets this file's accept handler,
 * and an "h2" twin: a copy of the ngx_listening_t whose addresses' confs say
 * http2. The accept handler peeks (MSG_PEEK: the bytes stay for NGINX) at up
 * to 24 bytes: as soon as one differs from HTTP/2's preface, the connection
 * is NGINX's as HTTP/1 (ngx_http_init_connection with the real socket); once
 * all 24 match, the same with c->listening the twin, so that
 * ngx_http_init_connection finds http2 in its address conf and hands the
 * connection to ngx_http_v2_init, which reads the preface itself. Until then
 * the connection waits under the default server's client_header_timeout, as
 * a new HTTP connection does, and is reusable (NGINX may close it when it
 * runs out of connections). Closed here, it is closed as NGINX closes an HTTP
 * connection (ngx_http_close_connection: stub_status's active count too).
 *
 * The twin is found from the socket: its ls->servers is this file's
 * ferryman_h2c_port_t, whose first member is the ngx_http_port_t
 * ngx_http_init_connection reads there (nothing else in NGINX reads
 * ls->servers). A connection on the twin keeps the real socket's addresses
 * (c->local_sockaddr is the connection's own; addr_text, the log's, is
 * copied), and the twin is never in cycle->listening: NGINX opens, closes and
 * inherits only the real socket.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman.h"


#define FERRYMAN_H2C_PREFACE  "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define FERRYMAN_H2C_LEN      (sizeof(FERRYMAN_H2C_PREFACE) - 1)


typedef struct {
    ngx_http_port_t         port;       /* first: NGINX reads it as its own */
    ngx_listening_t        *h2;         /* the twin whose addresses say http2 */
    ngx_msec_t              timeout;    /* the default server's */
} ferryman_h2c_port_t;


#if (NGX_HTTP_V2)

static void ferryman_h2c_accept(ngx_connection_t *c);
static void ferryman_h2c_peek(ngx_event_t *rev);
static void ferryman_h2c_wait(ngx_connection_t *c, ngx_msec_t timeout);


/* Whether every address of port (a socket of "family") has a default server
 * with the directive and is plaintext HTTP/1: any other would be peeked at in
 * vain (TLS, PROXY protocol) or is HTTP/2 already. */
static ngx_uint_t
ferryman_h2c_wanted(int family, ngx_http_port_t *port)
{
    ngx_uint_t                 i;
    ngx_http_addr_conf_t      *conf;
    ferryman_srv_conf_t       *fscf;
    ngx_http_core_srv_conf_t  *cscf;

    for (i = 0; i < port->naddrs; i++) {

#if (NGX_HAVE_INET6)
        if (family == AF_INET6) {
            conf = &((ngx_http_in6_addr_t *) port->addrs)[i].conf;
        } else
#endif
        {
            conf = &((ngx_http_in_addr_t *) port->addrs)[i].conf;
        }

        if (conf->ssl || conf->http2 || conf->proxy_protocol) {
            return 0;
        }

        cscf = conf->default_server;
        fscf = cscf->ctx->srv_conf[ngx_http_ferryman_module.ctx_index];

        if (!fscf->h2c_detect) {
            return 0;
        }
    }

    return port->naddrs > 0;
}


/* A copy of port (of the socket of "family") whose addresses say http2. */
static ngx_http_port_t *
ferryman_h2c_port(ngx_pool_t *pool, int family, ngx_http_port_t *port)
{
    size_t            size;
    ngx_uint_t        i;
    ngx_http_port_t  *h2;

    h2 = ngx_palloc(pool, sizeof(ngx_http_port_t));
    if (h2 == NULL) {
        return NULL;
    }

#if (NGX_HAVE_INET6)
    size = family == AF_INET6 ? sizeof(ngx_http_in6_addr_t)
                              : sizeof(ngx_http_in_addr_t);
#else
    size = sizeof(ngx_http_in_addr_t);
#endif

    h2->naddrs = port->naddrs;
    h2->addrs = ngx_pnalloc(pool, size * port->naddrs);
    if (h2->addrs == NULL) {
        return NULL;
    }

    ngx_memcpy(h2->addrs, port->addrs, size * port->naddrs);

    for (i = 0; i < port->naddrs; i++) {

#if (NGX_HAVE_INET6)
        if (family == AF_INET6) {
            ((ngx_http_in6_addr_t *) h2->addrs)[i].conf.http2 = 1;
            continue;
        }
#endif

        ((ngx_http_in_addr_t *) h2->addrs)[i].conf.http2 = 1;
    }

    return h2;
}


ngx_int_t
ferryman_h2c_init_module(ngx_cycle_t *cycle)
{
    int                        family;
    ngx_uint_t                 i;
    ngx_http_port_t           *port;
    ngx_listening_t           *ls, *h2;
    ferryman_h2c_port_t       *fport;
    ngx_http_addr_conf_t      *conf;

    ls = cycle->listening.elts;

    for (i = 0; i < cycle->listening.nelts; i++) {

        if (ls[i].handler != ngx_http_init_connection
            || ls[i].type != SOCK_STREAM)
        {
            continue;
        }

        /* TCP sockets only: a unix socket's connections come from this
         * machine's own clients, which choose their protocol's socket. */
        family = ls[i].sockaddr->sa_family;
        if (family != AF_INET
#if (NGX_HAVE_INET6)
            && family != AF_INET6
#endif
            )
        {
            continue;
        }

        port = ls[i].servers;

        if (!ferryman_h2c_wanted(family, port)) {
            continue;
        }

        fport = ngx_palloc(cycle->pool, sizeof(ferryman_h2c_port_t));
        h2 = ngx_palloc(cycle->pool, sizeof(ngx_listening_t));
        if (fport == NULL || h2 == NULL) {
            return NGX_ERROR;
        }

        *h2 = ls[i];
        h2->servers = ferryman_h2c_port(cycle->pool, family, port);
        if (h2->servers == NULL) {
            return NGX_ERROR;
        }

        fport->port = *port;
        fport->h2 = h2;

        /* The last address is the socket's own ("*" when there are more). */
#if (NGX_HAVE_INET6)
        if (family == AF_INET6) {
            conf = &((ngx_http_in6_addr_t *) port->addrs)[port->naddrs - 1]
                   .conf;
        } else
#endif
        {
            conf = &((ngx_http_in_addr_t *) port->addrs)[port->naddrs - 1]
                   .conf;
        }

        fport->timeout = conf->default_server->client_header_timeout;

        ls[i].servers = fport;
        ls[i].handler = ferryman_h2c_accept;
    }

    return NGX_OK;
}


static void
ferryman_h2c_accept(ngx_connection_t *c)
{
    ngx_event_t          *rev;
    ferryman_h2c_port_t  *fport;

    fport = c->listening->servers;
    rev = c->read;

    rev->handler = ferryman_h2c_peek;
    c->write->handler = ngx_http_empty_handler;
    c->log->action = "reading the first bytes";

    if (rev->ready) {
        /* deferred accept: the bytes are there */

        if (ngx_use_accept_mutex) {
            ngx_post_event(rev, &ngx_posted_events);
            return;
        }

        ferryman_h2c_peek(rev);
        return;
    }

    ferryman_h2c_wait(c, fport->timeout);
}


/* Nothing yet, or the start of the preface: wait for more. With epoll's
 * edge-triggered events (Linux), new bytes signal again though the peeked
 * ones are still unread. */
static void
ferryman_h2c_wait(ngx_connection_t *c, ngx_msec_t timeout)
{
    c->read->ready = 0;

    if (!c->read->timer_set) {
        ngx_add_timer(c->read, timeout);
    }

    ngx_reusable_connection(c, 1);

    if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
        ngx_http_close_connection(c);
    }
}


static void
ferryman_h2c_peek(ngx_event_t *rev)
{
    u_char                buf[FERRYMAN_H2C_LEN];
    ssize_t               n;
    ngx_err_t             err;
    ngx_uint_t            preface;
    ngx_connection_t     *c;
    ferryman_h2c_port_t  *fport;

    c = rev->data;
    fport = c->listening->servers;

    if (rev->timedout) {
        ngx_log_error(NGX_LOG_INFO, c->log, NGX_ETIMEDOUT, "client timed out");
        ngx_http_close_connection(c);
        return;
    }

    /* NGINX is short of connections (ngx_drain_connections) */
    if (c->close) {
        ngx_http_close_connection(c);
        return;
    }

    n = recv(c->fd, buf, FERRYMAN_H2C_LEN, MSG_PEEK);

    if (n == -1) {
        err = ngx_socket_errno;

        if (err == NGX_EAGAIN) {
            ferryman_h2c_wait(c, fport->timeout);
            return;
        }

        ngx_connection_error(c, err, "recv() failed");
        ngx_http_close_connection(c);
        return;
    }

    if (n == 0) {
        /* closed before a byte */
        ngx_http_close_connection(c);
        return;
    }

    preface = ngx_memcmp(buf, FERRYMAN_H2C_PREFACE, n) == 0;

    if (preface && (size_t) n < FERRYMAN_H2C_LEN) {
        ferryman_h2c_wait(c, fport->timeout);
        return;
    }

    if (rev->timer_set) {
        ngx_del_timer(rev);
    }

    ngx_reusable_connection(c, 0);

    if (preface) {
        c->listening = fport->h2;
    }

    /* It goes on with rev->ready: its handler reads what was peeked. */
    ngx_http_init_connection(c);
}

#else

ngx_int_t
ferryman_h2c_init_module(ngx_cycle_t *cycle)
{
    return NGX_OK;
}

#endif


char *
ferryman_h2c_detect_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ferryman_srv_conf_t  *fscf = conf;

#if (NGX_HTTP_V2)
    fscf->h2c_detect = 1;
    return NGX_CONF_OK;
#else
    (void) fscf;
    return "needs NGINX's http_v2_module";
#endif
}


void *
ngx_http_ferryman_create_srv_conf(ngx_conf_t *cf)
{
    /* h2c_detect: 0 */
    return ngx_pcalloc(cf->pool, sizeof(ferryman_srv_conf_t));
}
