// Package client is the Go client of the Spaces REST API: the types and
// calls of openapi.gen.go, generated from openapi.yaml by oapi-codegen (go
// generate; TestGeneratedIsCurrent fails when it is stale), and a small
// hand-written layer over them that every tool outside the service uses
// (the spaces CLI, the Terraform provider), never hand-written HTTP:
//
//   - New: the base URL, the bearer token, and a transport that retries
//     (retry.go);
//   - Check: a failed answer as an *Error, the problem document
//     (application/problem+json) or API Gateway's {"message"} as a Go
//     error that errors.Is matches against ErrNotFound, ErrConflict, …
//     (problem.go);
//   - retries of idempotent calls (GET, PUT, DELETE, and a POST that
//     carries an Idempotency-Key) on 429, 503 and 504 and on a connection
//     that failed, after the answer's Retry-After when it has one, else an
//     exponential backoff with jitter;
//   - an Idempotency-Key on every create whose route takes one (the
//     creates of idempotency.go, checked against openapi.yaml by
//     TestIdempotentCreatesMatchSpec), the same key on each retry.
//
// It imports nothing of the service (shared/, functions/): the contract is
// openapi.yaml alone, as for any customer's client (TestClientImports).
package client
