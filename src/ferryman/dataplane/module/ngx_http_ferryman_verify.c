/*
 * Verification of an upstream's certificate per request, with no reload:
 * egressMTLS verifyServer and externalAuth sslVerify (NIC's
 * proxy_ssl_verify on, proxy_ssl_trusted_certificate, proxy_ssl_verify_depth),
 * and egressMTLS protocols and ciphers (proxy_ssl_protocols, _ciphers).
 *
 * Those directives take no variables: NGINX builds one OpenSSL context per
 * location from them when the configuration loads. But what NGINX does with
 * them per connection reads only the request's upstream configuration
 * (u->conf): ngx_http_upstream_ssl_init_connection makes the connection from
 * u->conf->ssl, and ngx_http_upstream_ssl_handshake checks
 * SSL_get_verify_result and the name (ngx_ssl_check_host) when
 * u->conf->ssl_verify is set, failing the attempt as any connect error (the
 * next peer, then 502). So the balancer (ferryman_balancer.lua, through FFI,
 * before the connection is made) gives the request a copy of its location's
 * upstream configuration whose ssl is a context holding the Policy's CAs and
 * depth, with ssl_verify on: the verification is NGINX's own, with its log
 * lines, and a changed CA Secret is a push (a new key, a new context).
 *
 * Contexts are kept per worker by key (the Lua side's digest of the CAs, the
 * depth, the flags, the protocols and the ciphers), FERRYMAN_VERIFY_CONTEXTS of them; each request holds a reference
 * to its context until its pool is destroyed, so one evicted meanwhile stays
 * valid for it (an evicted entry's ngx_ssl_t is left allocated: SSL_CTX's
 * ex_data points at it).
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_ferryman.h"


#if (NGX_HTTP_SSL)

/* Distinct CA sets a worker keeps contexts for: one per Policy/Secret pair in
 * use; beyond it the oldest is rebuilt on its next request. */
#define FERRYMAN_VERIFY_CONTEXTS  64
#define FERRYMAN_VERIFY_KEY       64

/* ngx_http_ferryman_upstream_verify's flags. */
#define FERRYMAN_VERIFY_SNI  1   /* send the name as SNI (proxy_ssl_server_name) */
#define FERRYMAN_VERIFY_H2   2   /* gRPC: ALPN h2, as ngx_http_grpc_set_ssl */
#define FERRYMAN_VERIFY_ON   4   /* verify (else only protocols and ciphers) */
#define FERRYMAN_VERIFY_SANS 8   /* the certificate holds one of the SANs,
                                  * instead of the name (BackendTLSPolicy) */

/* Its protocols: bits as ferryman_upstream_verify.lua sets them. */
#define FERRYMAN_TLSv1    1
#define FERRYMAN_TLSv1_1  2
#define FERRYMAN_TLSv1_2  4
#define FERRYMAN_TLSv1_3  8
#define FERRYMAN_SSLv2    16
#define FERRYMAN_SSLv3    32

/* The longest cipher list taken (the Policy's is checked to be a list of
 * OpenSSL names by the controller). */
#define FERRYMAN_VERIFY_CIPHERS  1024


typedef struct {
    u_char      key[FERRYMAN_VERIFY_KEY];
    size_t      key_len;
    ngx_ssl_t  *ssl;
} ferryman_verify_ctx_t;


static ferryman_verify_ctx_t  ferryman_verify_ctxs[FERRYMAN_VERIFY_CONTEXTS];
static ngx_uint_t             ferryman_verify_next;
/* The SSL_CTX ex_data index of a context's SANs (FERRYMAN_VERIFY_SANS). */
static int                    ferryman_verify_sans_index = -1;


static void
ferryman_verify_release(void *data)
{
    SSL_CTX_free(data);
}


static void
ferryman_verify_sans_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
    long argl, void *argp)
{
    free(ptr);
}


/* Whether the certificate holds one of the SANs: "\n"-separated entries,
 * "H<DNS name>" (matched as NGINX matches proxy_ssl_name: X509_check_host,
 * wildcards in the certificate) or "U<URI>" (a URI SAN, byte for byte). */
static int
ferryman_verify_sans_match(X509 *cert, const u_char *sans)
{
    int                      i, n, found;
    size_t                   len;
    const u_char            *p, *end;
    GENERAL_NAME            *name;
    STACK_OF(GENERAL_NAME)  *names;

    names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    found = 0;

    for (p = sans; *p != '\0' && !found; p = (*end == '\0') ? end : end + 1) {
        end = (const u_char *) ngx_strchr(p, '\n');
        if (end == NULL) {
            end = p + ngx_strlen(p);
        }

        len = end - p;
        if (len < 2) {
            continue;
        }

        if (*p == 'H') {
            found = X509_check_host(cert, (const char *) p + 1, len - 1, 0, NULL)
                    == 1;
            continue;
        }

        n = names ? sk_GENERAL_NAME_num(names) : 0;
        for (i = 0; i < n && !found; i++) {
            name = sk_GENERAL_NAME_value(names, i);
            if (name->type == GEN_URI
                && (size_t) ASN1_STRING_length(name->d.uniformResourceIdentifier)
                   == len - 1
                && ngx_memcmp(ASN1_STRING_get0_data(name->d.uniformResourceIdentifier),
                              p + 1, len - 1) == 0)
            {
                found = 1;
            }
        }
    }

    if (names) {
        GENERAL_NAMES_free(names);
    }

    return found;
}


/* OpenSSL's verification callback of a FERRYMAN_VERIFY_SANS context: the
 * chain as OpenSSL verified it, then the leaf's SANs. A failure fails the
 * handshake (SSL_VERIFY_PEER), so the attempt fails as any connect error. */
static int
ferryman_verify_sans_callback(int ok, X509_STORE_CTX *store)
{
    SSL           *ssl;
    const u_char  *sans;

    if (!ok || X509_STORE_CTX_get_error_depth(store) != 0) {
        return ok;
    }

    ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    sans = ssl ? SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl),
                                     ferryman_verify_sans_index)
               : NULL;

    if (sans != NULL
        && ferryman_verify_sans_match(X509_STORE_CTX_get_current_cert(store),
                                      sans))
    {
        return 1;
    }

    ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                  "ferryman: upstream certificate holds none of the "
                  "BackendTLSPolicy's subjectAltNames");
    X509_STORE_CTX_set_error(store, X509_V_ERR_HOSTNAME_MISMATCH);

    return 0;
}


/* NGINX's protocol bits for ferryman's. */
static ngx_uint_t
ferryman_verify_protocols(int protocols)
{
    ngx_uint_t  out;

    out = 0;
    out |= (protocols & FERRYMAN_TLSv1) ? NGX_SSL_TLSv1 : 0;
    out |= (protocols & FERRYMAN_TLSv1_1) ? NGX_SSL_TLSv1_1 : 0;
    out |= (protocols & FERRYMAN_TLSv1_2) ? NGX_SSL_TLSv1_2 : 0;
    out |= (protocols & FERRYMAN_TLSv1_3) ? NGX_SSL_TLSv1_3 : 0;
    out |= (protocols & FERRYMAN_SSLv2) ? NGX_SSL_SSLv2 : 0;
    out |= (protocols & FERRYMAN_SSLv3) ? NGX_SSL_SSLv3 : 0;

    return out;
}


/* A client context as ngx_http_proxy_set_ssl makes one (ngx_ssl_create with
 * the protocols, else the location's protocol options; the ciphers, else
 * "DEFAULT"), with FERRYMAN_VERIFY_ON trusting the PEM's certificates (none:
 * the system's) to depth, as ngx_ssl_trusted_certificate sets them. */
static ngx_ssl_t *
ferryman_verify_create(ngx_ssl_t *like, const u_char *pem, size_t pem_len,
    int depth, int flags, int protocols, const u_char *ciphers,
    size_t ciphers_len, const u_char *sans, size_t sans_len, ngx_log_t *log)
{
    int          n;
    u_char      *copy;
    BIO         *bio;
    X509        *x509;
    u_char       list[FERRYMAN_VERIFY_CIPHERS + 1];
    ngx_ssl_t   *ssl;
    X509_STORE  *store;

    if (ciphers_len > FERRYMAN_VERIFY_CIPHERS) {
        return NULL;
    }

    ssl = ngx_calloc(sizeof(ngx_ssl_t), log);
    if (ssl == NULL) {
        return NULL;
    }

    /* The context outlives the request whose log this is. */
    ssl->log = ngx_cycle->log;

    if (ngx_ssl_create(ssl, protocols ? ferryman_verify_protocols(protocols)
                                      : NGX_SSL_TLSv1_2|NGX_SSL_TLSv1_3,
                       NULL)
        != NGX_OK)
    {
        ngx_free(ssl);
        return NULL;
    }

    if (protocols == 0 && like != NULL && like->ctx != NULL) {
        SSL_CTX_clear_options(ssl->ctx, SSL_CTX_get_options(ssl->ctx));
        SSL_CTX_set_options(ssl->ctx, SSL_CTX_get_options(like->ctx));
        SSL_CTX_set_min_proto_version(ssl->ctx,
                                      SSL_CTX_get_min_proto_version(like->ctx));
        SSL_CTX_set_max_proto_version(ssl->ctx,
                                      SSL_CTX_get_max_proto_version(like->ctx));
    }

    if (ciphers_len) {
        ngx_memcpy(list, ciphers, ciphers_len);
    } else {
        ngx_memcpy(list, "DEFAULT", sizeof("DEFAULT") - 1);
        ciphers_len = sizeof("DEFAULT") - 1;
    }

    list[ciphers_len] = '\0';

    if (SSL_CTX_set_cipher_list(ssl->ctx, (char *) list) == 0) {
        goto failed;
    }

#ifdef TLSEXT_TYPE_application_layer_protocol_negotiation
    if ((flags & FERRYMAN_VERIFY_H2)
        && SSL_CTX_set_alpn_protos(ssl->ctx, (u_char *) "\x02h2", 3) != 0)
    {
        goto failed;
    }
#endif

    if (!(flags & FERRYMAN_VERIFY_ON)) {
        return ssl;
    }

    SSL_CTX_set_verify_depth(ssl->ctx, depth);

    store = SSL_CTX_get_cert_store(ssl->ctx);

    bio = BIO_new_mem_buf(pem, (int) pem_len);
    if (bio == NULL) {
        goto failed;
    }

    for (n = 0; /* void */; n++) {
        x509 = PEM_read_bio_X509(bio, NULL, NULL, NULL);
        if (x509 == NULL) {
            break;
        }

        if (X509_STORE_add_cert(store, x509) != 1) {
            X509_free(x509);
            BIO_free(bio);
            goto failed;
        }

        X509_free(x509);
    }

    BIO_free(bio);
    ERR_clear_error();  /* the end of the PEM */

    if (pem_len == 0) {
        /* externalAuth sslVerify without trustedCertSecret: OpenSSL's own
         * trust store (the system's CAs). */
        if (SSL_CTX_set_default_verify_paths(ssl->ctx) != 1) {
            goto failed;
        }

    } else if (n == 0) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "ferryman: no certificate in a trusted CA set");
        goto failed;
    }

    if (flags & FERRYMAN_VERIFY_SANS) {
        if (ferryman_verify_sans_index == -1) {
            ferryman_verify_sans_index = SSL_CTX_get_ex_new_index(0, NULL, NULL,
                                             NULL, ferryman_verify_sans_free);
            if (ferryman_verify_sans_index == -1) {
                goto failed;
            }
        }

        copy = malloc(sans_len + 1);
        if (copy == NULL) {
            goto failed;
        }

        ngx_memcpy(copy, sans, sans_len);
        copy[sans_len] = '\0';

        if (SSL_CTX_set_ex_data(ssl->ctx, ferryman_verify_sans_index, copy)
            == 0)
        {
            free(copy);
            goto failed;
        }

        SSL_CTX_set_verify(ssl->ctx, SSL_VERIFY_PEER,
                           ferryman_verify_sans_callback);
    }

    return ssl;

failed:

    ngx_ssl_error(NGX_LOG_ERR, log, 0, "ferryman: upstream verify context");
    SSL_CTX_free(ssl->ctx);
    ngx_free(ssl);
    return NULL;
}


static ngx_ssl_t *
ferryman_verify_lookup(ngx_ssl_t *like, const u_char *key, size_t key_len,
    const u_char *pem, size_t pem_len, int depth, int flags, int protocols,
    const u_char *ciphers, size_t ciphers_len, const u_char *sans,
    size_t sans_len, ngx_log_t *log)
{
    ngx_uint_t              i;
    ngx_ssl_t              *ssl;
    ferryman_verify_ctx_t  *e;

    for (i = 0; i < FERRYMAN_VERIFY_CONTEXTS; i++) {
        e = &ferryman_verify_ctxs[i];

        if (e->ssl != NULL && e->key_len == key_len
            && ngx_memcmp(e->key, key, key_len) == 0)
        {
            return e->ssl;
        }
    }

    ssl = ferryman_verify_create(like, pem, pem_len, depth, flags, protocols,
                                 ciphers, ciphers_len, sans, sans_len, log);
    if (ssl == NULL) {
        return NULL;
    }

    e = &ferryman_verify_ctxs[ferryman_verify_next];
    ferryman_verify_next = (ferryman_verify_next + 1) % FERRYMAN_VERIFY_CONTEXTS;

    if (e->ssl != NULL) {
        /* Requests using it hold their own references; its ngx_ssl_t stays
         * allocated (the context's ex_data points at it). */
        SSL_CTX_free(e->ssl->ctx);
    }

    ngx_memcpy(e->key, key, key_len);
    e->key_len = key_len;
    e->ssl = ssl;

    return ssl;
}


/*
 * Called by the balancer of a TLS upstream (before each attempt's connect):
 * key identifies the context: the CA set (pem, PEM certificates; none: the
 * system's) with depth and flags, the protocols (0: the location's), the
 * ciphers (none: "DEFAULT") and, with FERRYMAN_VERIFY_SANS, the SANs one of
 * which the certificate must hold ("\n"-separated "H<name>", "U<URI>"): the
 * name is then sent as SNI only (NGINX's own check of it is off).
 * Returns 0, or -1 (no upstream, too long a key, a context that could not be
 * made: the balancer fails the request).
 */
int
ngx_http_ferryman_upstream_verify(ngx_http_request_t *r, const u_char *key,
    size_t key_len, const u_char *pem, size_t pem_len, int depth, int flags,
    int protocols, const u_char *ciphers, size_t ciphers_len,
    const u_char *sans, size_t sans_len)
{
    ngx_ssl_t                 *ssl;
    ngx_pool_cleanup_t        *cln;
    ngx_http_upstream_t       *u;
    ngx_http_upstream_conf_t  *conf;

    u = r->upstream;

    if (u == NULL || u->conf == NULL || key_len == 0
        || key_len > FERRYMAN_VERIFY_KEY)
    {
        return -1;
    }

    ssl = ferryman_verify_lookup(u->conf->ssl, key, key_len, pem, pem_len,
                                 depth, flags, protocols, ciphers, ciphers_len,
                                 sans, sans_len, r->connection->log);
    if (ssl == NULL) {
        return -1;
    }

    if (u->conf->ssl == ssl) {
        return 0;  /* a next attempt: the copy is in place */
    }

    conf = ngx_palloc(r->pool, sizeof(ngx_http_upstream_conf_t));
    if (conf == NULL) {
        return -1;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return -1;
    }

    SSL_CTX_up_ref(ssl->ctx);
    cln->handler = ferryman_verify_release;
    cln->data = ssl->ctx;

    *conf = *u->conf;
    conf->ssl = ssl;
    conf->ssl_session_reuse = 0;

    if (flags & FERRYMAN_VERIFY_ON) {
        /* With SANs OpenSSL's callback verifies (the context's); NGINX's
         * check would compare the certificate with the SNI name. */
        conf->ssl_verify = (flags & FERRYMAN_VERIFY_SANS) ? 0 : 1;
        conf->ssl_server_name = (flags & FERRYMAN_VERIFY_SNI) ? 1 : 0;
    }

    u->conf = conf;

    return 0;
}


/* A client's certificate required and verified in the handshake: a Gateway's
 * spec.tls.frontend validation in mode AllowValidOnly. ngx.ssl.verify_client
 * (ferryman_gateway_mtls.lua, in the certificate phase) gives the connection
 * its CAs with lua-nginx-module's callback, which accepts any outcome as
 * NGINX's does; here the callback passes OpenSSL's verdict on instead, and a
 * client sending no certificate fails too: the handshake is refused with
 * OpenSSL's alert, no request is read. */
static int
ferryman_client_verify_callback(int ok, X509_STORE_CTX *store)
{
    return ok;
}


int
ngx_http_ferryman_client_verify_required(void *ssl_conn)
{
    if (ssl_conn == NULL) {
        return -1;
    }

    SSL_set_verify(ssl_conn, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                   ferryman_client_verify_callback);

    return 0;
}

#else

int
ngx_http_ferryman_upstream_verify(ngx_http_request_t *r, const u_char *key,
    size_t key_len, const u_char *pem, size_t pem_len, int depth, int flags,
    int protocols, const u_char *ciphers, size_t ciphers_len,
    const u_char *sans, size_t sans_len)
{
    return -1;
}

int
ngx_http_ferryman_client_verify_required(void *ssl_conn)
{
    return -1;
}

#endif
