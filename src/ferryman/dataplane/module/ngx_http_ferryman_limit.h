/*
 * Rate limits of VirtualServer routes the module serves (NIC's rateLimit
 * Policy), with ngx_http_limit_req_module's arithmetic: ngx_http_ferryman_limit.c.
 */

#ifndef _NGX_HTTP_FERRYMAN_LIMIT_H_INCLUDED_
#define _NGX_HTTP_FERRYMAN_LIMIT_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>


/* The F record's bounds (kinds/virtualserver/records/fast.py keeps larger values in Lua):
 * rate in thousandths of a request per second, so that rate * ms and
 * excess * 1000 never overflow 64 bits. */
#define FERRYMAN_LIMIT_MAX_RATE   1000000000000ULL
#define FERRYMAN_LIMIT_MAX_KEY    65535


/* A variable of a key, by name as NGINX looks it up. */
typedef struct {
    ngx_str_t               name;        /* lowercased */
    ngx_uint_t              hash;
} ferryman_limit_var_t;


/* One limit_req: a NIC zone (one per Policy and VirtualServer) and its key
 * (literal parts and variables alternating: literals[0] var[0] literals[1]
 * ... literals[nvars]). */
typedef struct {
    ngx_str_t               zone;        /* "<pol ns>/<pol>/<vs ns>/<vs>" */
    ngx_str_t               log_name;    /* NIC's zone name, for the log */
    ngx_int_t               rate;        /* thousandths of a request / s */
    ngx_int_t               burst;       /* thousandths */
    ngx_int_t               delay;       /* thousandths; nodelay: huge */
    ngx_str_t              *literals;
    ferryman_limit_var_t   *vars;
    ngx_uint_t              nvars;
} ferryman_limit_t;


/* A route's limits: every one applies (NGINX's limit_req directives of one
 * location); the options are the location's. */
typedef struct {
    ferryman_limit_t       *limits;
    ngx_uint_t              nlimits;
    ngx_uint_t              status;      /* limit_req_status: rejectCode */
    ngx_uint_t              log_level;   /* limit_req_log_level */
    unsigned                dry_run:1;
} ferryman_limits_t;


/* Whether a variable name is one the module reads for a key (the rest stay
 * with the Lua slow path: NIC's jwt_claim_ and apikey_ variables). */
ngx_int_t ferryman_limit_var_known(ngx_str_t *name);

/* limit_req's decision for this request: NGX_DECLINED (go on; *delay > 0:
 * after that many ms) or the status to answer. */
ngx_int_t ferryman_limit_check(ngx_http_request_t *r, ferryman_limits_t *lim,
    ngx_msec_t *delay);

/* Holds the request for delay ms as limit_req does, then resumes its phases:
 * NGX_AGAIN, or NGX_HTTP_INTERNAL_SERVER_ERROR. */
ngx_int_t ferryman_limit_wait(ngx_http_request_t *r, ngx_msec_t delay);

/* Configuration: "ferryman_limit_zone <size>"; without it, a zone of the
 * default size is added once the fast zone is (postconfiguration). */
char *ferryman_limit_zone_directive(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
void ferryman_limit_preconfiguration(void);
ngx_int_t ferryman_limit_postconfiguration(ngx_conf_t *cf, void *tag);


#endif /* _NGX_HTTP_FERRYMAN_LIMIT_H_INCLUDED_ */
