#pragma once
// JSON Schema validation of tool-call arguments against the `parameters` schema a client offered
// with the tool (OpenAI function calling). The keywords tool schemas use, with JSON Schema's
// meaning (checked against Python's `jsonschema`, tests/tools/test_eval_schema_oracle.py):
//   type (a name or a list; "integer" also takes a float with no fraction, as JSON Schema does),
//   enum, const, properties, required, additionalProperties (bool or schema), items (schema),
//   minItems, maxItems, uniqueItems, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
//   minLength, maxLength (in code points), anyOf, oneOf, allOf, not.
// Other keywords (description, title, default, format, examples, pattern, $ref, ...) are not
// checked: a schema that needs them is validated on the rest, never refused.

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tandem::tools::eval {

// Ok when `value` satisfies `schema`; otherwise InvalidArgument naming the first failing place
// ("$.unit: \"kelvin\" is not one of [\"celsius\",\"fahrenheit\"]"). A schema nested deeper than 64
// levels, or a keyword of the wrong JSON type (properties that is not an object, ...), is an
// InvalidArgument about the schema. Never throws.
Status ValidateJsonSchema(const nlohmann::json& schema, const nlohmann::json& value);

// Whether two JSON values are equal as JSON Schema compares them (numbers by value: 1 == 1.0;
// containers element by element), which is also Python's == on json.loads values (BFCL's checker).
bool JsonSchemaEqual(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace tandem::tools::eval
