/*
 * Error pages per request: ingress-nginx's custom-http-errors
 * (dataplane/lua/ferryman_custom_errors.lua says what it serves).
 *
 * Why here: NGINX keeps error pages in a location's core configuration
 * (error_page) and intercepts an upstream's errors by a location's flag
 * (proxy_intercept_errors); neither takes a variable, so codes chosen per
 * route would need a location per set of codes in nginx.conf, a reload for
 * each new set. The slow path's locations set proxy_intercept_errors on and
 * have no error_page: ngx_http_upstream_intercept_errors declines a location
 * without error pages, so nothing is intercepted. For a request whose route
 * lists codes, the access phase calls ngx_http_ferryman_error_pages(), which
 * gives that request its own copy of the location's core configuration with
 * an error page per code; the upstream's responses of those codes are then
 * intercepted, and they and NGINX's own (a 502, a 504) redirect to
 * /_ferryman/custom-error/<code>. The copy lives in the request's pool;
 * the location and its other requests are not touched.
 *
 * The copy is the location's ngx_http_core_loc_conf_t, with only error_pages
 * differing, in a copy of the request's loc_conf array: the request's other
 * modules see their own configuration as before, and an internal redirect
 * (ngx.exec, the error page itself) sets the array anew from the location it
 * goes to.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>


/* As the annotation's parser allows (ingress_nginx_backend.MAX_CODES). */
#define FERRYMAN_ERROR_PAGES_MAX  32
#define FERRYMAN_ERROR_URI        "/_ferryman/custom-error/"


int ngx_http_ferryman_error_pages(ngx_http_request_t *r, const u_char *codes,
    size_t len);


/*
 * codes: three-digit status codes 400-599, comma-separated ("404,503").
 * Returns 0, or -1 (a malformed list, no memory: the request keeps its
 * location's configuration).
 */
int
ngx_http_ferryman_error_pages(ngx_http_request_t *r, const u_char *codes,
    size_t len)
{
    void                      **loc_conf;
    size_t                      i;
    ngx_int_t                   status[FERRYMAN_ERROR_PAGES_MAX];
    ngx_uint_t                  n, k;
    const size_t                uri_len = sizeof(FERRYMAN_ERROR_URI) - 1 + 3;
    ngx_array_t                *pages;
    ngx_http_err_page_t        *page, *old;
    ngx_http_core_loc_conf_t   *clcf, *copy;

    if (r == NULL || codes == NULL || len == 0
        || len > 4 * FERRYMAN_ERROR_PAGES_MAX)
    {
        return -1;
    }

    n = 0;

    for (i = 0; i < len; /* void */) {
        if (n == FERRYMAN_ERROR_PAGES_MAX || len - i < 3
            || codes[i] < '4' || codes[i] > '5'
            || codes[i + 1] < '0' || codes[i + 1] > '9'
            || codes[i + 2] < '0' || codes[i + 2] > '9')
        {
            return -1;
        }

        status[n++] = (codes[i] - '0') * 100 + (codes[i + 1] - '0') * 10
                      + (codes[i + 2] - '0');
        i += 3;

        if (i < len) {
            if (codes[i] != ',' || i + 1 == len) {
                return -1;
            }
            i++;
        }
    }

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    k = clcf->error_pages ? clcf->error_pages->nelts : 0;

    pages = ngx_array_create(r->pool, k + n, sizeof(ngx_http_err_page_t));
    copy = ngx_palloc(r->pool, sizeof(ngx_http_core_loc_conf_t));
    loc_conf = ngx_palloc(r->pool, sizeof(void *) * ngx_http_max_module);

    if (pages == NULL || copy == NULL || loc_conf == NULL) {
        return -1;
    }

    /* The location's own pages first: NGINX takes the first that matches. */
    if (k) {
        old = clcf->error_pages->elts;
        for (i = 0; i < k; i++) {
            page = ngx_array_push(pages);
            *page = old[i];
        }
    }

    for (i = 0; i < n; i++) {
        page = ngx_array_push(pages);
        ngx_memzero(page, sizeof(ngx_http_err_page_t));

        page->status = status[i];
        /* "=": the status is the default backend's answer, as ingress-nginx's
         * "error_page <code> = @custom_...". */
        page->overwrite = 0;

        page->value.value.data = ngx_pnalloc(r->pool, uri_len);
        if (page->value.value.data == NULL) {
            return -1;
        }

        page->value.value.len = ngx_sprintf(page->value.value.data,
                                            FERRYMAN_ERROR_URI "%03i",
                                            status[i])
                                - page->value.value.data;
    }

    *copy = *clcf;
    copy->error_pages = pages;

    ngx_memcpy(loc_conf, r->loc_conf, sizeof(void *) * ngx_http_max_module);
    loc_conf[ngx_http_core_module.ctx_index] = copy;
    r->loc_conf = loc_conf;

    return 0;
}
