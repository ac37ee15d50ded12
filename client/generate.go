package client

// The generator runs from the module proxy at a pinned version, so nothing
// needs installing and go.mod does not carry the generator's own
// dependencies. TestGeneratedIsCurrent runs this line again and compares.
//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml -o openapi.gen.go ../openapi.yaml
