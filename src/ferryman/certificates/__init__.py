"""cert-manager Certificates for VirtualServers' ``tls.cert-manager`` (--enable-cert-manager)."""
