"""Typed, validated views of the Kubernetes objects ferryman reads.

Parsing never trusts its input: every string that can reach the NGINX
configuration is checked here, once, against a whitelist (see ``validation``).
"""
