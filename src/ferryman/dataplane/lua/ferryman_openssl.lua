-- The libcrypto and libssl functions ferryman's Lua calls (LuaJIT FFI), with
-- opaque pointers for OpenSSL's types. NGINX is linked with both libraries, so
-- ffi.C finds them in the process: nothing is loaded, and the verification is
-- OpenSSL's own, as NGINX's would be. Declared in one place, each on its own:
-- a name another module declared already (LuaJIT refuses a second
-- declaration) keeps that declaration.

local ffi = require("ffi")

local DECLARATIONS = {
    "void *BIO_new_mem_buf(const void *buf, int len);",
    "int BIO_free(void *bio);",
    "void *PEM_read_bio_PUBKEY(void *bio, void **x, void *cb, void *u);",
    "void *PEM_read_bio_X509_CRL(void *bio, void **x, void *cb, void *u);",
    "void X509_CRL_free(void *crl);",
    "int X509_STORE_add_crl(void *store, void *crl);",
    "int X509_STORE_set_flags(void *store, unsigned long flags);",
    "void EVP_PKEY_free(void *pkey);",
    "void *EVP_MD_CTX_new(void);",
    "void EVP_MD_CTX_free(void *ctx);",
    "const void *EVP_get_digestbyname(const char *name);",
    "int EVP_DigestVerifyInit(void *ctx, void **pctx, const void *md, void *engine, void *pkey);",
    "int EVP_DigestVerify(void *ctx, const unsigned char *sig, size_t siglen,"
        .. " const unsigned char *tbs, size_t tbslen);",
    "int EVP_PKEY_CTX_set_rsa_padding(void *pctx, int padding);",
    "int EVP_PKEY_CTX_set_rsa_pss_saltlen(void *pctx, int len);",
    "unsigned char *HMAC(const void *md, const void *key, int key_len,"
        .. " const unsigned char *data, size_t data_len, unsigned char *out,"
        .. " unsigned int *out_len);",
    "int CRYPTO_memcmp(const void *a, const void *b, size_t len);",
    "void ERR_clear_error(void);",
    "long SSL_ctrl(void *ssl, int cmd, long larg, void *parg);",
    "uint64_t SSL_set_options(void *ssl, uint64_t options);",
    "int SSL_set_num_tickets(void *ssl, size_t num_tickets);",
    "long SSL_get_verify_result(const void *ssl);",
    "void *ngx_http_lua_ffi_get_req_ssl_pointer(void *r);",
}

for _, declaration in ipairs(DECLARATIONS) do
    pcall(ffi.cdef, declaration)
end

return ffi.C
