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
 * [<backup backend>]" (ferryman.kinds.transport.records.stream writes it); method is
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
 * address (the balancer turns it on for that peer only). A Gateway's TLS
 * listener (`ferryman_stream_preread`) reads it the same way, with no
 * fallback: a name no TLSRoute covers is closed.
 *
 * Files: this one holds the directives and the certificate variables;
 * ngx_stream_ferryman_balancer.c the peers' choice, and
 * ngx_stream_ferryman_records.c the look-up of a listener's records.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_stream.h>

#include "ngx_stream_ferryman.h"
#include "ngx_ferryman_stream_api.h"
#include "ngx_ferryman_fields.h"


static void *ngx_stream_ferryman_create_srv_conf(ngx_conf_t *cf);
static char *ngx_stream_ferryman_merge_srv_conf(ngx_conf_t *cf, void *parent,
    void *child);
static char *ngx_stream_ferryman(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_stream_ferryman_fallback(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_stream_ferryman_sni(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_stream_ferryman_preread(ngx_conf_t *cf, ngx_command_t *cmd,
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

    { ngx_string("ferryman_stream_preread"),
      NGX_STREAM_SRV_CONF|NGX_CONF_NOARGS,
      ngx_stream_ferryman_preread,
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
    conf->suffixes = NGX_CONF_UNSET;

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
    ngx_conf_merge_value(conf->suffixes, prev->suffixes, 0);

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


/* The variable that names a session's host: the SNI as read ahead
 * (ssl_preread_server_name) or as the handshake ended it (ssl_server_name). */
static char *
ngx_stream_ferryman_sni_from(ngx_conf_t *cf,
    ngx_stream_ferryman_srv_conf_t *fcf, ngx_str_t *variable)
{
    fcf->sni_index = ngx_stream_get_variable_index(cf, variable);

    if (fcf->sni_index == NGX_ERROR) {
        return NGX_CONF_ERROR;
    }

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

    return ngx_stream_ferryman_sni_from(cf, fcf, &sni);
}


static char *
ngx_stream_ferryman_sni(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_stream_ferryman_srv_conf_t  *fcf = conf;

    static ngx_str_t  sni = ngx_string("ssl_server_name");

    fcf->terminate = 1;

    return ngx_stream_ferryman_sni_from(cf, fcf, &sni);
}


/* Passthrough with no fallback (a Gateway's TLS listener): the SNI name
 * (ssl_preread) picks the record, else the wildcards that cover it, longest
 * suffix first (the Gateway API's hostnames: "*.example.com" covers
 * "a.b.example.com"; a TransportServer's covers one label, as NIC's); a
 * name no record covers is closed. */
static char *
ngx_stream_ferryman_preread(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_stream_ferryman_srv_conf_t  *fcf = conf;

    static ngx_str_t  sni = ngx_string("ssl_preread_server_name");

    fcf->suffixes = 1;

    return ngx_stream_ferryman_sni_from(cf, fcf, &sni);
}


/*
 * $ferryman_stream_certificate, $ferryman_stream_certificate_key (PEM): for
 * `ssl_certificate data:$ferryman_stream_certificate` in a server whose
 * TransportServers end TLS. The record "T:<listener>/<host>" (or
 * "T:<listener>" for one without a host) is "<base64 chain> <base64 key>"
 * (ferryman.kinds.transport.records.stream); the name is the client's SNI,
 * then its one-label wildcard, then none. No record: empty,
 * and the handshake fails.
 */
static ngx_int_t
ferryman_stream_certificate(ngx_stream_session_t *s,
    ngx_stream_variable_value_t *v, uintptr_t data)
{
    u_char                          *pos, *end, buf[FERRYMAN_STREAM_MAX_KEY];
    size_t                           len;
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

    if (ferryman_stream_host_record(conf, pool, 'T', (u_char *) name, len,
                                    buf, &key, &value)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (value.len == 0
        && ferryman_stream_listener_record(conf, pool, 'T', buf, &key, &value)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    pos = value.data;
    end = pos + value.len;

    for (i = 0; i <= data; i++) {
        if (ngx_ferryman_field(&pos, end, &field) != NGX_OK) {
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

