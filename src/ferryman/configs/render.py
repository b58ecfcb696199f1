"""Model -> NGINX text through the Jinja2 templates in ``templates/``."""

from __future__ import annotations

import jinja2

from ferryman.configs.model import MainConfig


def template_environment() -> jinja2.Environment:
    """The one Jinja2 set-up for every NGINX/Angie template."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("ferryman.configs", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # NGINX syntax, not HTML; values are validated instead
    )


class Renderer:
    def __init__(self) -> None:
        self._env = template_environment()

    def main(self, main: MainConfig) -> str:
        return self._env.get_template("nginx.conf.tmpl").render(main=main)

    def config_version(self, socket: str, version: int) -> str:
        return self._env.get_template("config-version.conf.tmpl").render(
            socket=socket, version=version
        )
