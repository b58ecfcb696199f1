/*
 * ngx_http_ferryman_module: ferryman's fast path, in C.
 *
 * Why C: with Debian's lua-nginx-module (stock LuaJIT), every *_by_lua entry
 * builds a fresh global environment and request context; measured here, that
 * fixed cost alone kept a Lua balancer at 0.91-0.95 of a hand-written NGINX
 * configuration's throughput. This module does the whole per-request work of
 * a proxied request without entering Lua: it finds the virtual host, matches
 * the path with Kubernetes' rules (or, for a VirtualServer host, with NGINX's
 * location precedence and NIC's matches and splits: ngx_http_ferryman_vs.c)
 * and picks the peer.
 *
 * Data: the Lua push handler (dataplane/lua/ferryman.lua) hands every virtual
 * host (H), endpoint set (E) and VirtualServer route (F) record to
 * ngx_http_ferryman_put() through LuaJIT's FFI (NGINX loads modules with
 * RTLD_GLOBAL, so ffi.C finds the symbols) and calls
 * ngx_http_ferryman_commit() once a push is complete.
 * Records live in the shared zone "ferryman_fast" as the text ferryman sent
 * (grammar: configs/routes.py, dataplane/lua/ferryman.lua). Each worker
 * decodes what its requests need into a cache it drops when the zone's
 * generation moves, so a committed push is in force from every worker's next
 * request on, exactly as with the Lua router.
 *
 * Routing runs in the precontent phase of the location marked
 * `ferryman_route @ferryman`: requests this module does not proxy (no virtual
 * host, no route, no ready endpoint, plain HTTP on a redirecting host) go to
 * that named location, the Lua slow path, which answers them; the others go
 * on to proxy_pass, whose upstream (`ferryman_fast`) picks the peer.
 *
 * Balancing: round-robin over a counter every worker shares (per backend, in
 * the zone), or least_conn (the fewest requests in flight, counted per peer in
 * the zone, ties broken in round-robin order); passive health with NGINX's
 * max_fails/fail_timeout semantics (failures are counted per peer in the zone,
 * so all workers agree); a failed attempt moves on to a peer this request has
 * not tried.
 *
 * In flight: every attempt the fast path sends to a peer is counted from the
 * balancer's get to its free, per peer, over all workers (a table of atomic
 * slots in the zone, see FERRYMAN_FLIGHT_BUCKETS), and exported to ferryman.lua
 * (ngx_http_ferryman_in_flight), so that "no request to this peer is left" is
 * a measurement ferryman can wait for before a machine goes away.
 *
 * Files: each part in its own (the list is in ngx_http_ferryman.h); this one
 * holds the directives, the variables and the phase handler's set-up.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman.h"


static char *ngx_http_ferryman_fast(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_ferryman_gateway_route(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static ngx_int_t ngx_http_ferryman_preconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_http_ferryman_postconfiguration(ngx_conf_t *cf);
static void *ngx_http_ferryman_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_ferryman_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);


ngx_int_t  ferryman_listener_index = NGX_ERROR;


static ngx_command_t  ngx_http_ferryman_commands[] = {

    { ngx_string("ferryman_fast_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_ferryman_zone,
      0,
      0,
      NULL },

    { ngx_string("ferryman_fast"),
      NGX_HTTP_UPS_CONF|NGX_CONF_NOARGS,
      ngx_http_ferryman_fast,
      0,
      0,
      NULL },

    /* ferryman_route @named_location: route in the precontent phase, hand
     * what the fast path does not proxy to that location. */
    { ngx_string("ferryman_route"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ferryman_loc_conf_t, slow_path),
      NULL },

    /* ferryman_gateway_route @named_location: the same for the Gateway
     * server, by socket and name (ngx_http_ferryman_gateway.c). */
    { ngx_string("ferryman_gateway_route"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_ferryman_gateway_route,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ferryman_loc_conf_t, slow_path),
      NULL },

    /* HTTP/1.x and h2c on one plaintext socket before NGINX 1.25.1
     * (ngx_http_ferryman_h2c.c). */
    { ngx_string("ferryman_h2c_detect"),
      NGX_HTTP_SRV_CONF|NGX_CONF_NOARGS,
      ferryman_h2c_detect_directive,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    /* The rate limits' zone (ngx_http_ferryman_limit.c): optional. */
    { ngx_string("ferryman_limit_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ferryman_limit_zone_directive,
      0,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_ferryman_module_ctx = {
    ngx_http_ferryman_preconfiguration,    /* preconfiguration */
    ngx_http_ferryman_postconfiguration,   /* postconfiguration */
    NULL,                                  /* create main configuration */
    NULL,                                  /* init main configuration */
    ngx_http_ferryman_create_srv_conf,     /* create server configuration */
    NULL,                                  /* merge server configuration */
    ngx_http_ferryman_create_loc_conf,     /* create location configuration */
    ngx_http_ferryman_merge_loc_conf       /* merge location configuration */
};


ngx_module_t  ngx_http_ferryman_module = {
    NGX_MODULE_V1,
    &ngx_http_ferryman_module_ctx,         /* module context */
    ngx_http_ferryman_commands,            /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    ferryman_h2c_init_module,              /* init module */
    NULL,                                  /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    NULL,                                  /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_int_t
ferryman_set_variable(ngx_http_variable_value_t *v, u_char *data, size_t len)
{
    v->data = data;
    v->len = len;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    return NGX_OK;
}


/* $ferryman_vhost and $ferryman_backend for the access log (latency
 * metrics); the slow path sets the same variables from Lua. */
static ngx_int_t
ferryman_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    ngx_str_t       *s;
    ferryman_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_ferryman_module);
    if (ctx == NULL || (data && ctx->backend == NULL)) {
        v->not_found = 1;
        return NGX_OK;
    }

    s = data ? &ctx->backend->sn.str : &ctx->host->sn.str;

    return ferryman_set_variable(v, s->data, s->len);
}


/* $ferryman_host: the authority requests were routed by, as the client sent
 * it (port included): an absolute-form request-target's (RFC 9112 3.2.2: it
 * wins over Host, as in $host), else the Host header, else $host. Upstream
 * requests carry it, as Kubernetes' Ingress expects. */
static ngx_int_t
ferryman_host_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    u_char                    *end, *last;
    ngx_str_t                 *s;
    ngx_http_core_srv_conf_t  *cscf;

    if (r->host_start != NULL && r->host_end != NULL) {
        /* The parser leaves these set for absolute-form targets only. NGINX
         * 1.22 ends the host before its port (the port's end was a field of
         * its own, gone since); NGINX 1.30 and Angie after it: take a port
         * that follows either way. */
        end = r->host_end;
        last = r->request_line.data + r->request_line.len;

        if (end < last && *end == ':') {
            do {
                end++;
            } while (end < last && *end >= '0' && *end <= '9');
        }

        return ferryman_set_variable(v, r->host_start, end - r->host_start);
    }

    if (r->headers_in.host != NULL && r->headers_in.host->value.len > 0) {
        s = &r->headers_in.host->value;

    } else if (r->headers_in.server.len > 0) {
        s = &r->headers_in.server;

    } else {
        cscf = ngx_http_get_module_srv_conf(r, ngx_http_core_module);
        s = &cscf->server_name;
    }

    return ferryman_set_variable(v, s->data, s->len);
}


/* $ferryman_connection: "upgrade" when the client asks for a WebSocket,
 * else empty, which leaves the upstream Connection header out (keepalive).
 * $ferryman_upgrade: the client's Upgrade header when it asks for a
 * WebSocket, else empty: no other protocol is forwarded (h2c would let a
 * client talk HTTP/2 to the backend past every rule). NGINX's own
 * $http_upgrade searches the request's header list on every request; this
 * reads the field NGINX already keeps. */
static ngx_int_t
ferryman_upgrade_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_table_elt_t  *upgrade;

    upgrade = r->headers_in.upgrade;

    if (upgrade == NULL || upgrade->value.len != sizeof("websocket") - 1
        || ngx_strncasecmp(upgrade->value.data, (u_char *) "websocket",
                           sizeof("websocket") - 1) != 0)
    {
        return ferryman_set_variable(v, (u_char *) "", 0);
    }

    if (data) {
        return ferryman_set_variable(v, (u_char *) "upgrade",
                                     sizeof("upgrade") - 1);
    }

    return ferryman_set_variable(v, upgrade->value.data, upgrade->value.len);
}


static ngx_http_variable_t  ferryman_variables[] = {

    /* Without this module, nginx.conf defines these three itself. */
    { ngx_string("ferryman_host"), NULL, ferryman_host_variable, 0, 0, 0 },

    { ngx_string("ferryman_connection"), NULL, ferryman_upgrade_variable,
      1, 0, 0 },

    { ngx_string("ferryman_upgrade"), NULL, ferryman_upgrade_variable, 0, 0, 0 },

    { ngx_string("ferryman_vhost"), NULL, ferryman_variable, 0,
      NGX_HTTP_VAR_CHANGEABLE|NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("ferryman_backend"), NULL, ferryman_variable, 1,
      NGX_HTTP_VAR_CHANGEABLE|NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


static ngx_int_t
ngx_http_ferryman_preconfiguration(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    /* The module stays loaded across reloads: forget the last cycle's zone. */
    ferryman_zone = NULL;
    ferryman_limit_preconfiguration();

    for (v = ferryman_variables; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


/* $ferryman_listener's index when the configuration defines it (a map in
 * nginx.conf's public part); asking for the index of an undefined variable
 * would fail the configuration ("unknown variable"), so look first. */
static ngx_int_t
ferryman_listener_variable(ngx_conf_t *cf, ngx_http_core_main_conf_t *cmcf)
{
    ngx_uint_t       i;
    ngx_hash_key_t  *key;
    ngx_str_t        name = ngx_string("ferryman_listener");

    ferryman_listener_index = NGX_ERROR;

    if (cmcf->variables_keys == NULL) {
        return NGX_OK;
    }

    key = cmcf->variables_keys->keys.elts;

    for (i = 0; i < cmcf->variables_keys->keys.nelts; i++) {
        if (key[i].key.len == name.len
            && ngx_strncmp(key[i].key.data, name.data, name.len) == 0)
        {
            ferryman_listener_index = ngx_http_get_variable_index(cf, &name);
            return ferryman_listener_index == NGX_ERROR ? NGX_ERROR : NGX_OK;
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_ferryman_postconfiguration(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    if (ferryman_listener_variable(cf, cmcf) != NGX_OK) {
        return NGX_ERROR;
    }

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_ferryman_route_handler;

    /* VirtualServer routes' rate limits: wherever the module routes. */
    if (ferryman_zone != NULL
        && ferryman_limit_postconfiguration(cf, &ngx_http_ferryman_module)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


static void *
ngx_http_ferryman_create_loc_conf(ngx_conf_t *cf)
{
    ferryman_loc_conf_t  *conf;

    /* slow_path: { 0, NULL }, i.e. unset */
    conf = ngx_pcalloc(cf->pool, sizeof(ferryman_loc_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    conf->gateway = NGX_CONF_UNSET;

    return conf;
}


static char *
ngx_http_ferryman_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ferryman_loc_conf_t  *prev = parent;
    ferryman_loc_conf_t  *conf = child;

    /* Both from the same directive (ferryman_route or
     * ferryman_gateway_route), here or inherited. */
    if (conf->slow_path.data == NULL) {
        conf->gateway = prev->gateway;

    } else if (conf->gateway == NGX_CONF_UNSET) {
        conf->gateway = 0;
    }

    ngx_conf_merge_str_value(conf->slow_path, prev->slow_path, "");
    ngx_conf_merge_value(conf->gateway, prev->gateway, 0);

    if (conf->slow_path.len > 0 && conf->slow_path.data[0] != '@') {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "ferryman_route needs a named location, not \"%V\"",
                           &conf->slow_path);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_ferryman_gateway_route(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ferryman_loc_conf_t  *flcf = conf;

    char  *rv;

    rv = ngx_conf_set_str_slot(cf, cmd, conf);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    flcf->gateway = 1;

    return NGX_CONF_OK;
}


static char *
ngx_http_ferryman_fast(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_upstream_srv_conf_t  *uscf;

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);

    if (uscf->peer.init_upstream) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "load balancing method redefined");
    }

    uscf->peer.init_upstream = ferryman_init_upstream;

    return NGX_CONF_OK;
}
