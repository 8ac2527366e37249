"""The real execution modules behind a state under test, wired as Salt's loader wires them: one
``__salt__`` mapping ``<virtualname>.<function>`` to every public function of the modules, shared
by them and by the state. For tests that drive a state against a real engine or real iptables
(unit tests give a state a dict of fakes instead)."""

import inspect
import pathlib

from support.scripts import load_module


def functions(*paths, salt=None, **dunders):
    """``__salt__`` for the execution modules ``paths`` (``_modules/x.py``), each loaded with
    ``dunders`` (``pillar=``, ``grains=``...; ``context`` defaults to one shared dict) and this
    same mapping as its ``__salt__``; ``salt``'s functions are added, and win over a loaded
    module's function of the same name (a fake for what the test does not drive for real)."""
    found = {}
    dunders.setdefault("context", {})
    for path in paths:
        module = load_module(path, f"ccc_test_module_{pathlib.Path(path).stem}", salt=found, **dunders)
        found.update({f"{module.__virtualname__}.{name}": function
                      for name, function in vars(module).items()
                      if not name.startswith("_") and inspect.isfunction(function)
                      and function.__module__ == module.__name__})
    found.update(salt or {})
    return found


def load_state(path, name, modules=(), salt=None, **dunders):
    """State module ``path`` loaded as ``name`` with ``dunders``, its ``__salt__`` the real
    execution modules ``modules`` (loaded with the same dunders, ``functions``) plus ``salt``."""
    return load_module(path, name, salt=functions(*modules, salt=salt, **dunders), **dunders)


class Fakes(dict):
    """A state's ``__salt__`` of fakes (``{"<module>.<function>": callable}``) that record each
    call in ``calls`` as ``(function, args)``, in order: the narrowest boundary of a state, so a
    test sees what it asked the execution modules for, and that test mode acted on nothing."""

    def __init__(self, functions):
        super().__init__()
        self.calls = []
        for key, function in functions.items():
            self[key] = self._recorded(key, function)

    def _recorded(self, key, function):
        def call(*args, **kwargs):
            self.calls.append((key, args + tuple(kwargs.values())))
            return function(*args, **kwargs)
        return call

    def called(self, *keys):
        """The recorded calls to ``keys`` (every call when none is named)."""
        return [call for call in self.calls if not keys or call[0] in keys]


def raises(exception):
    """A fake execution function that fails with ``exception`` (``CommandExecutionError``)."""
    def function(*args, **kwargs):
        raise exception
    return function
