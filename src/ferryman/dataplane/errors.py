"""Data-plane errors.

DataPlaneError
├── ConfigError        the new configuration was not taken; the old one serves
│   ├── ConfigTestError     ``nginx -t`` refused it (``culprits``: files it named)
│   └── ReloadError         NGINX did not confirm the new version in time
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
    pass


class PushError(DataPlaneError):
    pass
