/*
 * ngx_stream_ferryman_h2c_module: which protocol a plaintext HTTP connection
 * speaks, read ahead in a stream server.
 *
 * Why: gRPC clients speak HTTP/2 without TLS and with prior knowledge (h2c)
 * to a Gateway's HTTP listener, beside HTTP/1.1 clients on the same socket.
 * NGINX since 1.25.1 tells them apart itself (`http2 on`: it compares a
 * plaintext connection's first bytes with HTTP/2's connection preface).
 * Debian's NGINX 1.22 cannot: its `listen ... http2` makes a plaintext socket
 * speak HTTP/2 only. There the Gateway's HTTP sockets are stream servers that
 * read the first bytes ahead with this module and hand the connection, with
 * the PROXY protocol, to one of two sockets of the Gateway's HTTP server: one
 * with http2, one without (nginx.conf.tmpl, kinds/gateway/records/servers.py).
 *
 *   ferryman_h2c_preread;   (stream server) read ahead until the preface is
 *                           seen, or a byte differs from it
 *   $ferryman_h2c           "1" when the connection began with the preface,
 *                           "" otherwise (HTTP/1.x, anything else, or the
 *                           client said nothing within preread_timeout)
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_stream.h>


/* RFC 9113, 3.4: every HTTP/2 connection starts with these 24 octets. */
#define FERRYMAN_H2C_PREFACE  "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


typedef struct {
    ngx_flag_t  enabled;
} ngx_stream_ferryman_h2c_srv_conf_t;


typedef struct {
    ngx_uint_t  h2c;
} ngx_stream_ferryman_h2c_ctx_t;


static void *ngx_stream_ferryman_h2c_create_srv_conf(ngx_conf_t *cf);
static char *ngx_stream_ferryman_h2c_merge_srv_conf(ngx_conf_t *cf,
    void *parent, void *child);
static ngx_int_t ngx_stream_ferryman_h2c_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_stream_ferryman_h2c_init(ngx_conf_t *cf);
static char *ngx_stream_ferryman_h2c_preread(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);


static ngx_command_t  ngx_stream_ferryman_h2c_commands[] = {

    { ngx_string("ferryman_h2c_preread"),
      NGX_STREAM_SRV_CONF|NGX_CONF_NOARGS,
      ngx_stream_ferryman_h2c_preread,
      NGX_STREAM_SRV_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_stream_module_t  ngx_stream_ferryman_h2c_module_ctx = {
    ngx_stream_ferryman_h2c_add_variables, /* preconfiguration */
    ngx_stream_ferryman_h2c_init,          /* postconfiguration */
    NULL,                                  /* create main configuration */
    NULL,                                  /* init main configuration */
    ngx_stream_ferryman_h2c_create_srv_conf, /* create server configuration */
    ngx_stream_ferryman_h2c_merge_srv_conf /* merge server configuration */
};


ngx_module_t  ngx_stream_ferryman_h2c_module = {
    NGX_MODULE_V1,
    &ngx_stream_ferryman_h2c_module_ctx,   /* module context */
    ngx_stream_ferryman_h2c_commands,      /* module directives */
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


static ngx_str_t  ngx_stream_ferryman_h2c_name = ngx_string("ferryman_h2c");


/* The preread phase: NGX_AGAIN while every byte read so far is the preface's
 * and it is not whole yet; NGX_DECLINED once decided (the next handler of the
 * phase runs, as after ssl_preread's). */
static ngx_int_t
ngx_stream_ferryman_h2c_handler(ngx_stream_session_t *s)
{
    size_t                               size;
    ngx_connection_t                    *c;
    ngx_stream_ferryman_h2c_ctx_t       *ctx;
    ngx_stream_ferryman_h2c_srv_conf_t  *conf;

    static const u_char  preface[] = FERRYMAN_H2C_PREFACE;

    conf = ngx_stream_get_module_srv_conf(s, ngx_stream_ferryman_h2c_module);
    c = s->connection;

    if (!conf->enabled || c->type != SOCK_STREAM) {
        return NGX_DECLINED;
    }

    if (c->buffer == NULL) {
        return NGX_AGAIN;
    }

    size = ngx_min((size_t) (c->buffer->last - c->buffer->pos),
                   sizeof(preface) - 1);

    if (ngx_memcmp(c->buffer->pos, preface, size) != 0) {
        return NGX_DECLINED;
    }

    if (size < sizeof(preface) - 1) {
        return NGX_AGAIN;
    }

    ctx = ngx_pcalloc(c->pool, sizeof(ngx_stream_ferryman_h2c_ctx_t));
    if (ctx == NULL) {
        return NGX_ERROR;
    }

    ctx->h2c = 1;
    ngx_stream_set_ctx(s, ctx, ngx_stream_ferryman_h2c_module);

    return NGX_DECLINED;
}


static ngx_int_t
ngx_stream_ferryman_h2c_variable(ngx_stream_session_t *s,
    ngx_stream_variable_value_t *v, uintptr_t data)
{
    ngx_stream_ferryman_h2c_ctx_t  *ctx;

    ctx = ngx_stream_get_module_ctx(s, ngx_stream_ferryman_h2c_module);

    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
    v->len = (ctx != NULL && ctx->h2c) ? 1 : 0;
    v->data = (u_char *) "1";

    return NGX_OK;
}


static char *
ngx_stream_ferryman_h2c_preread(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_stream_ferryman_h2c_srv_conf_t  *hcf = conf;

    if (hcf->enabled != NGX_CONF_UNSET) {
        return "is duplicate";
    }

    hcf->enabled = 1;

    return NGX_CONF_OK;
}


static void *
ngx_stream_ferryman_h2c_create_srv_conf(ngx_conf_t *cf)
{
    ngx_stream_ferryman_h2c_srv_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_stream_ferryman_h2c_srv_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    conf->enabled = NGX_CONF_UNSET;

    return conf;
}


static char *
ngx_stream_ferryman_h2c_merge_srv_conf(ngx_conf_t *cf, void *parent,
    void *child)
{
    ngx_stream_ferryman_h2c_srv_conf_t  *prev = parent;
    ngx_stream_ferryman_h2c_srv_conf_t  *conf = child;

    ngx_conf_merge_value(conf->enabled, prev->enabled, 0);

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_stream_ferryman_h2c_add_variables(ngx_conf_t *cf)
{
    ngx_stream_variable_t  *var;

    var = ngx_stream_add_variable(cf, &ngx_stream_ferryman_h2c_name, 0);
    if (var == NULL) {
        return NGX_ERROR;
    }

    var->get_handler = ngx_stream_ferryman_h2c_variable;

    return NGX_OK;
}


static ngx_int_t
ngx_stream_ferryman_h2c_init(ngx_conf_t *cf)
{
    ngx_stream_handler_pt        *h;
    ngx_stream_core_main_conf_t  *cmcf;

    cmcf = ngx_stream_conf_get_module_main_conf(cf, ngx_stream_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_STREAM_PREREAD_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_stream_ferryman_h2c_handler;

    return NGX_OK;
}
