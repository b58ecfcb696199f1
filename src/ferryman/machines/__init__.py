"""Machine deletion lifecycle hooks, and a reference machine deletion controller.

``hooks`` (which hooks a Machine has, in either API's form, and the rule that
freezes them once deletion starts), ``conditions`` and ``lifecycle`` (what
the Machine API writes and does next) are pure and shared; ``reconciler``,
``drain``, ``provider``, ``events`` and ``webhook`` are the controller
``ferryman machine-controller`` (``command``) runs.
"""
