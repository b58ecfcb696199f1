"""Model -> NGINX text through the Jinja2 templates in ``templates/``."""

from __future__ import annotations

import jinja2

from ferryman.configs.model import MainConfig


class Renderer:
    def __init__(self) -> None:
        self._env = jinja2.Environment(
            loader=jinja2.PackageLoader("ferryman.configs", "templates"),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            autoescape=False,  # NGINX syntax, not HTML; no resource strings reach it
        )

    def main(self, main: MainConfig) -> str:
        return self._env.get_template("nginx.conf.tmpl").render(main=main)

    def config_version(self, socket: str, version: int) -> str:
        return self._env.get_template("config-version.conf.tmpl").render(
            socket=socket, version=version
        )
