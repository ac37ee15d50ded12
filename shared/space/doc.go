// Package space is the Spaces domain: what a space and a cloud account are,
// which inputs are valid, how probe results move a space's status, and which
// spaces each picker may offer. It imports no AWS, Kubernetes or HTTP package;
// adapters implement the small interfaces declared here.
//
// Support windows (support.go) are data, not code: one dated file per
// provider in supportwindows/, embedded, each row with its source page.
// SupportOf answers standard, extended, ended or unknown for a GET /version
// string at a time; a version the file does not list is unknown, never
// supported. The rules are in support.go's opening comment.
package space
