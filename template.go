// Package spaces holds what belongs to the repository as a whole: the SAM
// template that declares every AWS resource.
package spaces

import _ "embed"

// Template is template.yaml: the one source of truth for resources. SAM
// deploys it; the local stack and the tests create exactly what it declares
// in the embedded emulator.
//
//go:embed template.yaml
var Template []byte
