"""The one checker of the cluster roles' settings (``_utils/ccc_role_schema.py``): each rule a
schema may state, the sentence an admin gets for each, and the paths those sentences name."""

from support import site  # noqa: F401  (puts _utils on sys.path)

import ccc_role_schema


def problems(settings, **spec):
    return ccc_role_schema.problems("timezone", settings, {"type": "mapping", **spec})


def one(value, **spec):
    return problems({"k": value}, keys={"k": spec})


def test_types_never_take_a_yaml_boolean_for_a_number():
    assert one(True, type="integer") == ["ccc:timezone:k must be a whole number, got True"]
    assert one(1.5, type="integer") == ["ccc:timezone:k must be a whole number, got 1.5"]
    assert one(1.5, type="number") == [] and one(2, type="number") == []
    assert one(False, type="number") == ["ccc:timezone:k must be a number, got False"]
    assert one("yes", type="boolean") == ["ccc:timezone:k must be true or false, got 'yes'"]
    assert one(None, type=["integer", "null"]) == []
    assert one(None, type="integer") == ["ccc:timezone:k must be a whole number, got None"]


def test_bounds_and_further_values():
    assert one(0, type=["integer", "null"], minimum=1) == [
        "ccc:timezone:k must be a whole number >= 1 or null, got 0"]
    assert one(100, type="integer", minimum=0, maximum=99) == ["ccc:timezone:k must be a whole number 0..99, got 100"]
    assert one(-1, type="integer", minimum=1, also=[-1]) == []
    assert one(-2, type="integer", minimum=1, also=[-1]) == ["ccc:timezone:k must be a whole number >= 1 or -1, got -2"]
    assert one(True, type="integer", minimum=0, also=[1]) != []  # True is not 1 here either


def test_enum_pattern_and_formats():
    assert one("b", enum=["a", "c"]) == ["ccc:timezone:k must be one of a, c, got 'b'"]
    assert one(1, enum=[True, "auto"]) != [] and one(True, enum=[True, "auto"]) == []
    assert one("ab\n", type="string", pattern="[a-z]+") != []  # the whole string, no final newline
    assert one("abc", type="string", pattern="[a-z]+") == []
    assert one("x", type="string", format="folder") == [
        "ccc:timezone:k must be an absolute folder other than /, got 'x'"]
    assert one("/", type="string", format="folder") != [] and one("/srv", type="string", format="folder") == []
    assert one("Ana", type="string", format="stack_name") != []  # ccc_rules.is_stack_name
    assert one("10.0.0.300", type="string", format="ip_network") != []
    assert one("(", type="string", format="regex") == ["ccc:timezone:k must be a regular expression, got '('"]
    assert one("10.0.0.1", type="string", format="ipv6_address") == [
        "ccc:timezone:k must be an IPv6 address, got '10.0.0.1'"]
    assert one("fd00::1", type="string", format="ipv6_address") == one("10.0.0.1", type="string", format="ipv4_address")
    assert one("fd00::1", type="string", format="ipv4_address") != []
    assert one("x", type="string", format="ipv4_address") != []
    assert one("10.0.0.5", type="string", format="ip_interface") != []  # the prefix length is required
    assert one("10.0.0.5/33", type="string", format="ip_interface") != []
    assert one("fd00::5/64", type="string", format="ip_interface") == []
    assert one("bond0.20", type="string", format="interface_name") == []
    assert one("a-very-long-interface", type="string", format="interface_name") == [
        "ccc:timezone:k must be an interface name (1 to 15 letters, digits, '_', '.', '-'), "
        "got 'a-very-long-interface'"]
    assert one("eth/0", type="string", format="interface_name") != []


def test_texts_name_what_a_value_must_be():
    assert one(3, type="string", text="a zone name") == ["ccc:timezone:k must be a zone name, got 3"]


def test_list_items_are_named_by_value_and_mappings_in_lists_by_index():
    items = {"type": "string", "pattern": "[a-z]+", "text": "a word"}
    assert one(["ok", "no way", 3], type="list", items=items) == [
        "ccc:timezone:k: 'no way' is not a word", "ccc:timezone:k: 3 is not a word"]
    assert one([], type="list", min_items=1) == ["ccc:timezone:k must be a non-empty list, got []"]
    assert one([1], type="list", min_items=2) == ["ccc:timezone:k must be a list of at least 2 items, got [1]"]
    entry = {"type": "mapping", "required": ["a"], "keys": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    assert one([{"a": "x"}, {"b": "y"}], type="list", items=entry) == [
        "ccc:timezone:k[1]:a is required: a string", "ccc:timezone:k[1]:b must be a whole number, got 'y'"]


def test_mappings_known_required_unknown_names_and_values():
    assert problems({"x": 1}, unknown="refuse", keys={"k": {}}) == [
        "ccc:timezone has unknown keys: x (known: k)"]
    assert problems({"x": 1}, keys={"k": {}}) == []  # other keys are allowed unless refused
    spec = {"type": "mapping", "names": {"type": "string", "pattern": "[a-z]+", "text": "a name"},
            "values": {"type": "integer"}}
    assert one({"ok": 1, "Bad": 2, "no": "x"}, **spec) == [
        "ccc:timezone:k: 'Bad' is not a name", "ccc:timezone:k:no must be a whole number, got 'x'"]
    assert problems({"k": None}, required=["k"], keys={"k": {"type": ["string", "null"]}}) == [
        "ccc:timezone:k is required: a string or null"]
    assert ccc_role_schema.problems("timezone", {"k": None}, {"required": ["k"]}, require=False) == []
    assert problems({"k": None}, required=["k"], keys={"k": {"type": "string"}}) == [
        "ccc:timezone:k is required: a string"]  # said once, not also as "must be a string, got None"


def test_the_settings_key_names_the_path():
    assert ccc_role_schema.problems("superfan_gpu", {"packages": 1}, {"superfan_gpu": {
        "type": "mapping", "keys": {"packages": {"type": "list"}}}}) == ["ccc:fans:packages must be a list, got 1"]
