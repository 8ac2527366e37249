"""
Execution module ``ccc_fans``: the GPU-driven fan controller as Salt sees it (its effective
configuration from pillar ``ccc:fans``, the curve, and the running controller's state).

The Supermicro system fan zones of a GPU server follow the hottest GPU (the CCC "superfans"
behaviour) through the BMC's raw IPMI commands. The code lives in ``_utils/`` (plain Python,
shared with the agent): ``ccc_fan_config`` (defaults and validation), ``ccc_fan_curve`` (curve
and duty), ``ccc_fan_control`` (averaging, hysteresis, fail-safe, BMC mode), ``ccc_ipmi``
(ipmitool commands and retries) and ``ccc_fan_state`` (the state file). Pillar keys, defaults
and meanings: ``docs/pillar.md`` (``ccc:fans``); ``salt-call ccc_fans.config`` shows the
effective values.

Why a separate long-lived service and not something inside salt-minion (a beacon, a schedule
or an engine): the controller owns the fans between two ``ipmitool`` calls. It must keep
running, and restore the BMC mode when it stops, independently of minion restarts, Salt
upgrades and state runs (Salt restarts its own processes during those, and a state run can
block a minion for minutes). It needs a tight 2 s loop and its own SIGTERM/SIGINT handling,
which Salt's process model does not offer to execution modules. And a crash or hang of Salt must
never leave the fans at a low manual duty: as its own systemd unit
(``agents/systemd/ccc-fan-controller.service``, ``agents/ccc_fan_controller.py``) the
controller restores the BMC mode on its own exit and is restarted by systemd on failure. Salt
only installs it, renders its configuration from pillar (``config``, through
``agents/config/fan-controller.yaml.jinja``) and reads its state file (``status``).
"""

import time

import ccc_fan_config
import ccc_fan_curve
import ccc_fan_state
import ccc_pillar
from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_fans"


def __virtual__():
    return __virtualname__


def _checked(raw):
    try:
        return ccc_fan_config.controller_config(raw)
    except ccc_fan_config.ConfigError as exc:
        raise CommandExecutionError(str(exc)) from None


def config():
    """
    Show the fan controller's effective configuration: pillar ``ccc:fans`` over the defaults,
    validated (what ``agents/config/fan-controller.yaml.jinja`` writes to
    ``/etc/ccc/fan-controller.yaml``). An invalid pillar fails with every problem named.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.config
    """
    return _checked(ccc_pillar.pillar_ccc(__pillar__).get("fans") or {})


def controller_config(fans):
    """
    Check a proposed ``ccc:fans`` mapping before putting it into pillar: the configuration it
    gives, or every problem named.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.controller_config '{"zones": [1], "interpolate": true}'
    """
    return _checked(fans)


def load_config_file(path=ccc_fan_config.DEFAULT_CONFIG_FILE):
    """
    Check the agent's configuration file as the agent reads it: the configuration it gives,
    or why the agent would refuse it.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.load_config_file /etc/ccc/fan-controller.yaml
    """
    try:
        return ccc_fan_config.load_file(path)
    except (OSError, ccc_fan_config.ConfigError) as exc:
        raise CommandExecutionError(f"{path}: {exc}") from None


def curve():
    """
    Show the effective fan curve from pillar ``ccc:fans`` (``{°C: duty %}``), whether it
    interpolates, and the minimum duty it was checked against.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.curve
    """
    settings = config()
    return {"curve": settings["curve"], "interpolate": settings["interpolate"], "min_duty": settings["min_duty"]}


def normalize_curve(curve, min_duty=None):  # pylint: disable=redefined-outer-name
    """
    Check a fan curve ``{temperature: duty}`` and show it sorted as ``{°C: duty %}``. Keys may
    be numeric strings (``"60"``). ``min_duty`` defaults to the effective ``ccc:fans:min_duty``.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.normalize_curve '{"0": 20, "60": 30, "70": 40}'
    """
    if min_duty is None:
        min_duty = config()["min_duty"]
    try:
        return ccc_fan_curve.normalize(curve, min_duty)
    except ccc_fan_curve.CurveError as exc:
        raise CommandExecutionError(str(exc)) from None


def duty_for(temperature, interpolate=None):
    """
    Show the fan duty (%) the effective curve of pillar ``ccc:fans`` gives a temperature (°C);
    ``interpolate=`` overrides the pillar's choice.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.duty_for 72
        salt-call ccc_fans.duty_for 72 interpolate=True
    """
    settings = config()
    if interpolate is None:
        interpolate = settings["interpolate"]
    try:
        return ccc_fan_curve.duty_for(settings["curve"], temperature, interpolate)
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from None


def status(state_file=None):
    """
    Show the running controller's state (its state file): BMC mode, fail-safe, control
    temperature, duty per zone, how old that is (``stale`` when older than five intervals or
    10 s) and the problem, if any. An invalid pillar does not hide the state: the defaults'
    state file and interval are used then.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_fans.status
    """
    try:
        settings = config()
    except CommandExecutionError:
        settings = ccc_fan_config.DEFAULTS
    return ccc_fan_state.status(state_file or settings["state_file"], settings["interval"], time.time())
