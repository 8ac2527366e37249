"""
The fan curve: validating a CCC curve ``{temperature: duty}`` and the duty it gives a
temperature. Pure functions, shared by the fan controller (``agents/ccc_fan_controller.py``),
its configuration (``ccc_fan_config``) and ``salt-call ccc_fans.duty_for``.

* The duty of a temperature is the duty of the largest threshold at or below it (a step
  function, the original controller's rule); with ``interpolate`` it is linear between
  neighbouring points, rounded up (never less air than the line), and flat above the last.
* A usable curve has a point at or below 0 °C (so every temperature has a duty) and a duty that
  never falls as the temperature rises (a hotter GPU must never get less air).
"""

import itertools
import math
import numbers


class CurveError(ValueError):
    """The fan curve is unusable; the message lists every problem."""


def number(value):
    """``value`` as a finite int or float (numeric strings too), else None. Booleans are not numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, numbers.Real):
        return None
    value = float(value)
    if not math.isfinite(value):
        return None
    return int(value) if value.is_integer() else value


class Points(tuple):
    """A validated curve: sorted ``(temperature, duty)`` pairs (what ``points`` returns)."""


def _items(curve):
    if isinstance(curve, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in curve):
        return list(curve)
    if isinstance(curve, dict):
        return list(dict.items(curve))
    raise CurveError(f"invalid fan curve: expected a mapping of temperature (°C) to duty (%), got {curve!r}")


def _point_problem(key, duty, min_duty):
    """Why one ``key: duty`` entry is unusable, or None; the parsed pair as the second value."""
    temperature, percent = number(key), number(duty)
    if temperature is None or not -100 <= temperature <= 150:
        return f"temperature {key!r} is not a number of °C between -100 and 150", None
    if percent is None or not 0 <= percent <= 100:
        return f"duty {duty!r} at {temperature} °C is not a percentage between 0 and 100", None
    if percent < min_duty:
        return (f"duty {percent} % at {temperature} °C is below the minimum duty {min_duty} % "
                "(slow fans can stall and make the BMC force full speed; see min_duty)"), None
    return None, (temperature, percent)


def points(curve, min_duty=0):
    """
    Validate ``curve`` (a mapping, or ``(temperature, duty)`` pairs) and return it as ``Points``.
    Raises ``CurveError`` naming every problem: no points, a non-numeric temperature or duty, a
    duty outside 0-100 or below ``min_duty``, a temperature given twice, a duty that falls as
    the temperature rises, no point at or below 0 °C.
    """
    if isinstance(curve, Points):
        return curve
    problems, pairs = [], []
    items = _items(curve)
    if not items:
        problems.append("the curve has no points")
    for key, duty in items:
        problem, pair = _point_problem(key, duty, min_duty)
        if problem:
            problems.append(problem)
        else:
            pairs.append(pair)
    pairs.sort()
    for (t1, _), (t2, _) in itertools.pairwise(pairs):
        if t1 == t2:
            problems.append(f"temperature {t1} °C appears twice")
    for (t1, d1), (t2, d2) in itertools.pairwise(pairs):
        if d2 < d1:
            problems.append(f"duty falls from {d1} % at {t1} °C to {d2} % at {t2} °C (a hotter GPU must never get less air)")
    if pairs and pairs[0][0] > 0:
        problems.append(f"the lowest point is {pairs[0][0]} °C: the curve needs a point at 0 °C or below "
                        "(e.g. 0: 20) so that every temperature has a duty")
    if problems:
        raise CurveError("invalid fan curve: " + "; ".join(problems))
    return Points(pairs)


def normalize(curve, min_duty=0):
    """The validated curve as a sorted ``{°C: duty %}`` mapping (see ``points``)."""
    return dict(points(curve, min_duty))


def duty_for(curve, temperature, interpolate=False):
    """
    The fan duty (%) for ``temperature`` (°C) on ``curve`` (``Points``, or a curve ``points``
    validates). Raises ``ValueError`` for a temperature that is not a number or lies below the
    curve's lowest point.
    """
    pairs = points(curve)
    value = number(temperature)
    if value is None:
        raise ValueError(f"temperature {temperature!r} is not a number")
    if value < pairs[0][0]:
        raise ValueError(f"{value} °C is below the curve's lowest point {pairs[0][0]} °C")
    below = [pair for pair in pairs if pair[0] <= value]
    low_t, low_d = below[-1]
    if not interpolate or len(below) == len(pairs):
        return math.ceil(low_d - 1e-9)
    high_t, high_d = pairs[len(below)]
    duty = low_d + (high_d - low_d) * (value - low_t) / (high_t - low_t)
    return math.ceil(duty - 1e-9)
