package space

import "regexp"

// Pattern is a regular expression over ASCII with a length limit, for the
// naming rules whose length the clouds bound: `^[a-z][-a-z0-9]*$` with max
// 63 says what `^[a-z][-a-z0-9]{0,62}$` says. Go compiles a counted
// repetition into a program that many instructions long, and every cold
// start of every function linking the rule paid for it (the package inits
// of space, provisioning and httpapi allocated about 1.5 MB, enough to run
// the garbage collector during init).
type Pattern struct {
	re  *regexp.Regexp
	max int
}

// MustPattern compiles expr; a string longer than max bytes never matches.
func MustPattern(expr string, max int) Pattern {
	return Pattern{re: regexp.MustCompile(expr), max: max}
}

// MatchString reports whether s is at most max bytes and matches.
func (p Pattern) MatchString(s string) bool { return len(s) <= p.max && p.re.MatchString(s) }
