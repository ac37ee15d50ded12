package spaces

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the REST API, served at
// GET /openapi.yaml and used by tests to check every exchange against it.
//
//go:embed openapi.yaml
var OpenAPI []byte
