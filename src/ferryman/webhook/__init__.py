"""The readiness-gate injection webhook: a mutating admission webhook for pods.

- ``admission``: the decision, pure: an AdmissionReview in, a response (with a
  JSONPatch adding ferryman's gate, or none) out. It reads the pod from the
  request and the served Services from the controller's cache, nothing else.
- ``certificate``: the serving certificate: read from a Secret's data, or made.
- ``cluster``: the API calls: the certificate's Secret (read, or created once for
  every replica) and the caBundle of the MutatingWebhookConfiguration.
- ``server``: the HTTPS server the API server calls, and its lifecycle.

app/root.py wires it with callables (the served Services, namespace opt-in), so it
never imports the controller.
"""
