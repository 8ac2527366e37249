"""
Kept only so that the states that still ``import ccc_state_ret`` load while they move to
``_states/_ccc_state_ret.py`` (``import _ccc_state_ret as ccc_state_ret``), where the state
return lives now: ``_utils/`` holds no Salt state contract. Importable only while Salt loads a
state module (its folder is then on ``sys.path``); remove once no state imports it.
"""

from _ccc_state_ret import result  # noqa: F401  (re-exported for the states not moved yet)
