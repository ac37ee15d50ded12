package space

import (
	"strings"
	"unicode/utf8"
)

// Sort orders a listing of spaces. The zero value is id order, the
// listing's default; the others order by name,
// compared case-insensitively (FoldName), by registration time, or by
// stored status (active, inactive, unknown) then name, or by status since
// (StatusSince, oldest change first), ties broken by id; "-" reverses them.
// SortProblems, problems first, has no reverse: inactive, then unknown,
// then active, each with the latest status change first.
type Sort string

const (
	SortName           Sort = "name"
	SortNameDesc       Sort = "-name"
	SortRegistered     Sort = "registered"
	SortRegisteredDesc Sort = "-registered"
	SortStatus         Sort = "status"
	SortStatusDesc     Sort = "-status"
	// SortStatusSince orders by StatusSince, which moves only on a
	// transition: -status_since lists the latest changes first.
	SortStatusSince     Sort = "status_since"
	SortStatusSinceDesc Sort = "-status_since"
	// SortProblems is triage order: the stored status, inactive, then
	// unknown, then active, and within each the latest change
	// (StatusSince) first, ties broken by id.
	SortProblems Sort = "problems"
)

// Sorts lists the orders a listing may ask for.
var Sorts = []Sort{SortName, SortNameDesc, SortRegistered, SortRegisteredDesc, SortStatus, SortStatusDesc,
	SortStatusSince, SortStatusSinceDesc, SortProblems}

// Base is the order without its direction.
func (s Sort) Base() Sort { return Sort(strings.TrimPrefix(string(s), "-")) }

// Desc reports whether the order is descending.
func (s Sort) Desc() bool { return strings.HasPrefix(string(s), "-") }

// FoldName is a name as searched and sorted: lower case, so that searching
// and ordering ignore case.
func FoldName(name string) string { return strings.ToLower(name) }

// ValidSearch reports whether text can be searched for in names: what a
// name may hold (checkName), 1 to 100 characters; leading and trailing
// spaces are allowed, since a prefix may end in one.
func ValidSearch(text string) bool {
	if text == "" || !utf8.ValidString(text) || utf8.RuneCountInString(text) > maxNameLen {
		return false
	}
	for _, r := range text {
		if invisible(r) {
			return false
		}
	}
	return true
}
