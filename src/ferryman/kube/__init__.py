"""The one Kubernetes API boundary: only this package imports lightkube.

- ``errors``: ferryman's API error tree, and the one place lightkube's
  ``ApiError`` (and httpx's status errors) become it.
- ``resources``: the API's kinds (and the client's types) the rest of ferryman names.
- ``client``: the client (kubeconfig or in-cluster) and calls with errors mapped.
- ``watch``: the list+watch loop every watcher of the API runs.
- ``writers``: Events and status patches.
- ``leases``: the replica report Lease gates and drains publish in;
  ``leader``: leader election on a Lease; ``lease_clock``: when a Lease's
  holder counts as alive (pure: the gates' core reads it too).

Nothing is imported here: manifests mode imports ``ferryman.kube.lease_clock``
(through the gates' pure core) and must not load lightkube.
"""
