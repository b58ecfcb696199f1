"""Model -> NGINX text through the Jinja2 templates in ``templates/``."""

from __future__ import annotations

import functools

import jinja2

from ferryman.configs import buffer_tiers
from ferryman.configs.listen import listens
from ferryman.configs.model import MainConfig


@functools.cache
def template_environment() -> jinja2.Environment:
    """The one Jinja2 set-up for every NGINX/Angie template, made once: its
    cache keeps each template compiled (compiling nginx.conf.tmpl takes as long
    as rendering it, and the stream configuration asked for a new one each time)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ferryman.configs", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # NGINX syntax, not HTML; values are validated instead
    )
    # The slow path's locations per buffer tier (nginx.conf.tmpl).
    env.globals.update(
        slow_variants=buffer_tiers.slow_variants(),
        buffer_count=buffer_tiers.BUFFERS,
        buffer_busy=buffer_tiers.BUSY,
        # A public port's listen lines, IPv4 and IPv6 (configs/listen.py).
        listens=listens,
    )
    return env


class Renderer:
    def __init__(self) -> None:
        self._env = template_environment()

    def main(self, main: MainConfig) -> str:
        return self._env.get_template("nginx.conf.tmpl").render(main=main)

    def config_version(self, socket: str, version: int) -> str:
        return self._env.get_template("config-version.conf.tmpl").render(
            socket=socket, version=version
        )
