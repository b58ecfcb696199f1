"""The real-component test harness: what tests/ and bench/ build their runs from.

ferryman with a real NGINX and real backends (``harness``), NGINX running Lua
alone (``lua_nginx``), a real kube-apiserver (``apiserver``), the test kubelet
and its pod processes (``kubelet``, ``podproc``), the backends' network namespace
(``netns``), the Gateway API conformance environment (``gateway_environment``,
``echo_pod``, ``conformance_run``), certificates and tokens (``pki``, ``jose``,
``tls``), NIC's examples and fixtures (``nic_fixtures``, ``nic_edit``,
``nic_resources``), hypothesis strategies (``strategies``), and the builders of
objects and requests that more than one test module uses.

Tests and benches import it; ferryman itself never does (an import-linter
contract in pyproject.toml holds that).
"""
