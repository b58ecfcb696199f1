"""Data-plane errors.

DataPlaneError
├── ConfigError        the new configuration was not taken; the old one serves
│   ├── ConfigTestError     ``nginx -t`` refused it (``culprits``: files it named)
│   └── ReloadError         NGINX did not confirm the new version in time
│                           (``ports``: those its master could not bind)
└── PushError  the endpoints socket refused or did not answer
"""

from __future__ import annotations


class DataPlaneError(Exception):
    pass


class ConfigError(DataPlaneError):
    def __init__(self, message: str, culprits: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.culprits = culprits


class ConfigTestError(ConfigError):
    pass


class ReloadError(ConfigError):
    def __init__(self, message: str, ports: dict[int, str] | None = None) -> None:
        """``ports``: the ports the master could not bind (port -> the reason
        NGINX gave): whoever asked for them is refused them, and the reload
        goes on without (the same files would fail for ever)."""
        super().__init__(message)
        self.ports = dict(ports or {})


# What a reload whose listeners could not bind leads to (``ReloadError.ports``):
# the resources asking for the ports were refused them (the files changed:
# reload again now); a port is ferryman's own (--http-port...: retried later,
# the holder may go); nobody can drop them (the last good files stay, as after
# a test refusal: the same files would fail for ever).
DROPPED = "dropped"
RETRY = "retry"
GIVE_UP = "give up"


class PushError(DataPlaneError):
    pass
