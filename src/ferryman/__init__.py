"""ferryman: a Kubernetes Ingress Controller driving NGINX (and Angie).

The public surface is the ``ferryman`` command (``ferryman.app.cli``); everything
else is internal and may change between releases.
"""

__version__ = "0.1.0"
