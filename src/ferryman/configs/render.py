"""Model -> NGINX text through the Jinja2 templates in ``templates/``."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2

from ferryman.configs import buffer_tiers
from ferryman.configs.listen import listens
from ferryman.configs.model import MainConfig

# Compiled templates, kept as Python keeps compiled modules: written by
# ``python -m ferryman.configs.render`` (scripts/setup.sh, the image's build),
# read by every start, which then compiles none (~40 ms of its CPU; issue 31).
# Jinja checks each against its template's source and its own version: a
# template edited since is compiled again, never served stale.
_COMPILED = Path(__file__).parent / "templates" / "__pycache__"


class _ReadOnlyCache(jinja2.FileSystemBytecodeCache):
    """A run reads the compiled templates and never writes them (the image's
    root is read-only; a checkout's are written by its set-up, as its .pyc)."""

    def dump_bytecode(self, bucket: Any) -> None:
        pass


@functools.cache
def template_environment(bytecode_cache: jinja2.BytecodeCache | None = None) -> jinja2.Environment:
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
        bytecode_cache=bytecode_cache or _ReadOnlyCache(str(_COMPILED)),
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


def compile_templates() -> list[str]:
    """Every template compiled into the cache every start reads: the names."""
    _COMPILED.mkdir(exist_ok=True)
    env = template_environment(jinja2.FileSystemBytecodeCache(str(_COMPILED)))
    names = env.list_templates(extensions=["tmpl"])
    for name in names:
        env.get_template(name)
    return names


if __name__ == "__main__":
    compile_templates()
