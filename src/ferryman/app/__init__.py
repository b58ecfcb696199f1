"""app: the process. The ``ferryman`` command (``cli``, entered through ``launch``),
its flags (``flag_types``, ``flag_settings``, NIC's in ``nic_flags``) and the
composition roots that build every part and wire them: ``root`` for ``run``,
``render`` for ``render``, ``kubernetes_mode`` for what only a cluster adds, and
``wiring``, the kinds and data-plane shape both are built from. The only package that
names every other; nothing below it imports it, except the machine controller its
command runs (``flag_types``). Kept empty so that ``launch`` imports nothing before it
pauses the garbage collector."""
