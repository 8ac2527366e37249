"""The quick schema verdict never disagrees with jsonschema: for any settings file a user can
write (generated sections, schema-shaped or not, and any YAML value), a document it calls valid
is one jsonschema finds no error in, and one it calls invalid has an error. Undecided documents
go to jsonschema, so they cannot disagree."""

import jsonschema
from hypothesis import event, given
from hypothesis import strategies as st

from support import strategies as gen
from support.hypothesis_profiles import examples

import ccc_schema  # noqa: E402
import ccc_schema_verdict  # noqa: E402

PROPERTIES = ccc_schema.USER_SETTINGS_SCHEMA["additionalProperties"]["properties"]
HTTP_ENTRY = PROPERTIES["FRP_PORTS"]["properties"]["HTTP"]["items"]["properties"]
# Values at and around each length bound of the schema (generated texts and lists are short).
BOUNDED = {**PROPERTIES, **HTTP_ENTRY, **PROPERTIES["FRP_PORTS"]["properties"]}
BOUNDS = [(key, bound, schema[bound]) for key, schema in BOUNDED.items()
          for bound in ("maxLength", "minLength", "maxItems") if bound in schema]


@st.composite
def at_bounds(draw):
    key, bound, limit = draw(st.sampled_from(BOUNDS))
    size = draw(st.sampled_from([limit - 1, limit, limit + 1]))
    if bound == "maxItems":  # distinct items the item schema takes, so only the count decides
        value = [f"node{index}" if key == "DEPLOYMENT_NODES" else index + 1 for index in range(size)]
        if key == "HTTP":
            value = [{"port": port, "subdomain": f"s{port}"} for port in value]
    else:
        value = draw(st.sampled_from(["a", "0", "A"])) * size
    if key in HTTP_ENTRY:
        return {"ana-main": {"FRP_PORTS": {"HTTP": [{"port": 80, "subdomain": "x", key: value}]}}}
    if key in ("TCP", "HTTP"):
        return {"ana-main": {"FRP_PORTS": {key: value}}}
    return {"ana-main": {key: value}}


VALIDATOR = jsonschema.validators.validator_for(ccc_schema.USER_SETTINGS_SCHEMA)(ccc_schema.USER_SETTINGS_SCHEMA)
documents = st.one_of(
    gen.sections(max_keys=8).map(lambda section: {"ana-main": section}),
    st.dictionaries(gen.texts, gen.sections(max_keys=3) | gen.values, max_size=2),
    gen.values,
    at_bounds(),
)


@examples(3)
@given(document=documents)
def test_the_quick_verdict_agrees_with_jsonschema(document):
    verdict = ccc_schema_verdict.verdict(document, ccc_schema.USER_SETTINGS_SCHEMA)
    event(f"verdict {verdict}")
    if verdict is not None:
        assert verdict == VALIDATOR.is_valid(document), (verdict, list(VALIDATOR.iter_errors(document))[:3])
