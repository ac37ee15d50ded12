// Package space is the Spaces domain: what a space and a cloud account are,
// which inputs are valid, how probe results move a space's status, and which
// spaces each picker may offer. It imports no AWS, Kubernetes or HTTP package;
// adapters implement the small interfaces declared here.
package space
