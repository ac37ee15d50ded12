package iamcheck

import (
	"fmt"
	"path"
	"strings"
)

// Allows reports whether c's function's role allows c: some statement
// grants its action on a resource pattern its resource matches. A call
// with no resource (an operation not modelled) is never allowed.
func (p Policies) Allows(c Call) bool {
	if c.Resource == "" {
		return false
	}
	for _, st := range p.Statements[p.Roles[c.Function]] {
		if st.grants(c) {
			return true
		}
	}
	return false
}

func (st Statement) grants(c Call) bool {
	return st.grantsAction(c.Action) && st.grantsResource(c.Resource)
}

func (st Statement) grantsAction(action string) bool {
	for _, a := range st.Actions {
		if match(strings.ToLower(a), strings.ToLower(action)) {
			return true
		}
	}
	return false
}

func (st Statement) grantsResource(resource string) bool {
	for _, r := range st.Resources {
		if match(r, resource) {
			return true
		}
	}
	return false
}

// match is IAM's pattern match: * any run of characters, ? one
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html).
// path.Match's * stops at "/", and IAM's does not, so "/" is taken out of
// both first.
func match(pattern, s string) bool {
	const slash = "\x00"
	pattern = strings.ReplaceAll(strings.ReplaceAll(pattern, `\`, `\\`), "[", `\[`)
	ok, err := path.Match(strings.ReplaceAll(pattern, "/", slash), strings.ReplaceAll(s, "/", slash))
	return err == nil && ok
}

// Denied are the calls that their function's role does not allow, each
// said as a sentence.
func (p Policies) Denied(calls []Call) []string {
	var out []string
	for _, c := range calls {
		switch {
		case p.Roles[c.Function] == "":
			out = append(out, fmt.Sprintf("%s: a call of a function the template does not declare", c))
		case c.Resource == "":
			out = append(out, fmt.Sprintf("%s: an operation infra/iamcheck does not model (operations.go): name its resources there", c))
		case !p.Allows(c):
			out = append(out, fmt.Sprintf("%s: %s's role %s does not allow it; grant it in template.yaml", c, c.Function, p.Roles[c.Function]))
		}
	}
	return out
}

// Unused are the grants no call uses and no justification excuses, and
// the justifications that do not hold (their action is used), each said
// as a sentence.
func (p Policies) Unused(calls []Call) []string {
	byRole := map[string][]Call{}
	for _, c := range calls {
		byRole[p.Roles[c.Function]] = append(byRole[p.Roles[c.Function]], c)
	}
	var out []string
	for _, role := range sortedKeys(p.Statements) {
		for _, st := range p.Statements[role] {
			for _, a := range st.Actions {
				_, justified := st.Justified[a]
				for _, r := range st.Resources {
					used := false
					for _, c := range byRole[role] {
						if match(strings.ToLower(a), strings.ToLower(c.Action)) && match(r, c.Resource) {
							used = true
							break
						}
					}
					switch {
					case used && justified:
						out = append(out, fmt.Sprintf("%s %s: %s on %s is used, yet its \"# iam:\" comment says it need not be; drop %s from the comment", role, st.Sid, a, r, a))
					case !used && !justified:
						out = append(out, fmt.Sprintf("%s %s: %s on %s is granted and no recorded call uses it; drop the grant, or say why it is needed in a \"# iam: %s: why\" comment above the statement", role, st.Sid, a, r, a))
					}
				}
			}
		}
	}
	return out
}
