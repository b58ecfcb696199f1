/*
 * The rate limits' keys: NIC's key templates, literals and ${variables}
 * (those the module reads, ferryman_limit_var_known), evaluated per request.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman_limit.h"
#include "ngx_http_ferryman_limit_state.h"


/* Keys. */

ngx_int_t
ferryman_limit_var_known(ngx_str_t *name)
{
    ngx_uint_t  i;

    static ngx_str_t  names[] = {
        ngx_string("binary_remote_addr"),
        ngx_string("request_uri"),
        ngx_string("uri"),
        ngx_string("args"),
        ngx_string("request_method"),
        ngx_string("remote_addr"),
    };

    static ngx_str_t  prefixes[] = {
        ngx_string("arg_"),
        ngx_string("http_"),
        ngx_string("cookie_"),
    };

    for (i = 0; i < sizeof(names) / sizeof(ngx_str_t); i++) {
        if (name->len == names[i].len
            && ngx_strncmp(name->data, names[i].data, name->len) == 0)
        {
            return NGX_OK;
        }
    }

    for (i = 0; i < sizeof(prefixes) / sizeof(ngx_str_t); i++) {
        if (name->len > prefixes[i].len
            && ngx_strncmp(name->data, prefixes[i].data, prefixes[i].len) == 0)
        {
            return NGX_OK;
        }
    }

    return NGX_DECLINED;
}


/* "<zone>\0<key>" into key; the key part's length into *len (0: empty, the
 * request is not limited by this one). */
ngx_int_t
ferryman_limit_key(ngx_http_request_t *r, ferryman_limit_t *limit,
    ngx_str_t *key, size_t *len)
{
    u_char                      *p;
    size_t                       size;
    ngx_uint_t                   i;
    ngx_str_t                    few[FERRYMAN_LIMIT_FEW], *values;
    ngx_http_variable_value_t   *vv;

    values = few;

    if (limit->nvars > FERRYMAN_LIMIT_FEW) {
        values = ngx_palloc(r->pool, limit->nvars * sizeof(ngx_str_t));
        if (values == NULL) {
            return NGX_ERROR;
        }
    }

    size = limit->literals[0].len;

    for (i = 0; i < limit->nvars; i++) {
        vv = ngx_http_get_variable(r, &limit->vars[i].name,
                                   limit->vars[i].hash);

        if (vv == NULL || vv->not_found) {
            values[i].len = 0;
            values[i].data = (u_char *) "";

        } else {
            values[i].len = vv->len;
            values[i].data = vv->data;
        }

        size += values[i].len + limit->literals[i + 1].len;
    }

    *len = size;

    if (size == 0 || size > FERRYMAN_LIMIT_MAX_KEY) {
        return NGX_OK;
    }

    key->len = limit->zone.len + 1 + size;
    key->data = ngx_pnalloc(r->pool, key->len);
    if (key->data == NULL) {
        return NGX_ERROR;
    }

    p = ngx_cpymem(key->data, limit->zone.data, limit->zone.len);
    *p++ = '\0';
    p = ngx_cpymem(p, limit->literals[0].data, limit->literals[0].len);

    for (i = 0; i < limit->nvars; i++) {
        p = ngx_cpymem(p, values[i].data, values[i].len);
        p = ngx_cpymem(p, limit->literals[i + 1].data,
                       limit->literals[i + 1].len);
    }

    return NGX_OK;
}
