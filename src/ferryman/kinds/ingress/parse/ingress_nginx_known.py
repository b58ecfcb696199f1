"""ingress-nginx's annotations (its documentation and its parsers, v1.15.1)
beside those ``ingress_nginx.py``'s ``ENTRIES`` serve: a name here that no
entry names is known, not applied yet, said in a Warning; a name in neither
is a misspelling ingress-nginx ignored silently."""

from __future__ import annotations

ANNOTATIONS = frozenset(
    """
        affinity-canary-behavior affinity-mode allowlist-source-range app-root
        auth-always-set-cookie auth-cache-duration auth-cache-key auth-keepalive
        auth-keepalive-requests auth-keepalive-share-vars auth-keepalive-timeout auth-method
        auth-proxy-set-headers auth-realm auth-request-redirect auth-response-headers
        auth-secret auth-secret-type auth-signin auth-signin-redirect-param
        auth-tls-error-page auth-tls-match-cn auth-tls-pass-certificate-to-upstream
        auth-tls-secret auth-tls-verify-client auth-tls-verify-depth auth-type auth-url
        connection-proxy-header
        cors-allow-credentials cors-allow-headers cors-allow-methods cors-allow-origin
        cors-expose-headers cors-max-age custom-headers custom-http-errors default-backend
        denylist-source-range disable-proxy-intercept-errors enable-access-log enable-cors
        enable-global-auth enable-modsecurity enable-opentelemetry enable-owasp-core-rules
        enable-rewrite-log fastcgi-index fastcgi-params-configmap force-ssl-redirect
        from-to-www-redirect http2-push-preload limit-allowlist limit-connections limit-rate
        limit-rate-after limit-whitelist mirror-host mirror-request-body mirror-target
        modsecurity-transaction-id opentelemetry-operation-name
        opentelemetry-trust-incoming-span permanent-redirect permanent-redirect-code
        preserve-trailing-slash proxy-cookie-domain proxy-cookie-path proxy-http-version
        proxy-request-buffering proxy-ssl-ciphers proxy-ssl-name proxy-ssl-protocols
        proxy-ssl-secret proxy-ssl-server-name proxy-ssl-verify proxy-ssl-verify-depth
        relative-redirects rewrite-target satisfy server-alias
        session-cookie-change-on-failure session-cookie-conditional-samesite-none
        ssl-ciphers ssl-passthrough ssl-prefer-server-ciphers temporal-redirect
        temporal-redirect-code upstream-hash-by-subset upstream-hash-by-subset-size
        use-port-in-redirects use-regex whitelist-source-range
        """.split()  # noqa: SIM905 (a word list)
)
