package space

import (
	"strings"
	"unicode"
)

// Searching names by word prefix. A name is split into words: a word is a
// run of letters and digits (any other character, such as "-", "_", "."
// or a space, separates words), itself split where digits and letters
// meet and where a lower-case letter is followed by an upper-case one; the
// words are folded (FoldName). So "prod-payments-eu" is prod, payments, eu
// and "PaymentsAPI2" is payments, api, 2, and a search for "pay" finds
// both. The store keeps one index entry per word of a space, so that a
// search reads the entries under its prefix only, whatever the fleet's
// size.

// MaxNameWords bounds the words of a name that are indexed (the first
// ones, in the name's order, each once): a rename moves at most twice as
// many entries, which keeps its transaction well inside DynamoDB's 100
// items. A name of 100 characters can hold 50 words; a real name rarely
// holds more than 8.
const MaxNameWords = 16

// NameWords is the words of name that a search finds it by: distinct, in
// the name's order, at most MaxNameWords.
func NameWords(name string) []string {
	words := splitWords(name)
	if len(words) > MaxNameWords {
		words = words[:MaxNameWords]
	}
	return words
}

// SearchWords is what a search text asks for: its words, split as names
// are (none when the text holds no letter or digit). A name matches when
// each of them begins one of the name's words (MatchesWords).
func SearchWords(text string) []string { return splitWords(text) }

// MatchesWords reports whether each search word begins one of words (a
// name's, NameWords).
func MatchesWords(words, search []string) bool {
	for _, s := range search {
		if FirstWordWith(words, s) == "" {
			return false
		}
	}
	return true
}

// FirstWordWith is the smallest of words (in byte order, the index's
// order) that begins with prefix, or "": a space whose name has several
// such words is listed once, at that word's entry.
func FirstWordWith(words []string, prefix string) string {
	first := ""
	for _, w := range words {
		if strings.HasPrefix(w, prefix) && (first == "" || w < first) {
			first = w
		}
	}
	return first
}

// DrivingWord is the search word whose entries a search reads: the longest
// (the most selective, as a rule), the first of equals; the others filter.
func DrivingWord(search []string) string {
	d := ""
	for _, s := range search {
		if len(s) > len(d) {
			d = s
		}
	}
	return d
}

// splitWords splits s into its distinct folded words, in order.
func splitWords(s string) []string {
	var words []string
	seen := map[string]bool{}
	var cur []rune
	end := func() {
		if len(cur) == 0 {
			return
		}
		w := FoldName(string(cur))
		if !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
		cur = cur[:0]
	}
	var prev rune
	for _, r := range s {
		switch {
		case unicode.IsMark(r) && len(cur) > 0:
			// A combining mark belongs to the letter before it.
			cur = append(cur, r)
			continue
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			end()
		case len(cur) > 0 && (unicode.IsDigit(r) != unicode.IsDigit(prev) || unicode.IsLower(prev) && unicode.IsUpper(r)):
			end()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	end()
	return words
}
