package space

import (
	"slices"
	"strings"
	"testing"
)

func TestNameWords(t *testing.T) {
	for _, c := range []struct {
		name string
		want []string
	}{
		{"prod-payments-eu", []string{"prod", "payments", "eu"}},
		{"PaymentsAPI2", []string{"payments", "api", "2"}},
		{"payments_api.v2 eu", []string{"payments", "api", "v", "2", "eu"}},
		{"eu2west", []string{"eu", "2", "west"}},
		{"k8s", []string{"k", "8", "s"}},
		{"camelCaseName", []string{"camel", "case", "name"}},
		{"HTTPServer", []string{"httpserver"}}, // only lower→upper splits
		{"Prod-PROD-prod", []string{"prod"}},   // each word once
		{"al|pha", []string{"al", "pha"}},
		{"--a--", []string{"a"}},
		{"Zürich-1", []string{"zürich", "1"}},
		{"Zu\u0308rich", []string{"zu\u0308rich"}}, // a combining mark stays in its word
		{"", nil},
		{"- _ .", nil},
		{"007", []string{"007"}},
	} {
		if got := NameWords(c.name); !slices.Equal(got, c.want) {
			t.Errorf("NameWords(%q) = %q, want %q", c.name, got, c.want)
		}
	}
	// At most MaxNameWords, the first ones.
	var long []string
	for i := range 40 {
		long = append(long, string(rune('a'+i%26))+strings.Repeat("x", i/26))
	}
	got := NameWords(strings.Join(long, "-"))
	if len(got) != MaxNameWords || got[0] != "a" || got[MaxNameWords-1] != long[MaxNameWords-1] {
		t.Errorf("NameWords of 40 words: %q", got)
	}
}

func TestSearchMatchesWords(t *testing.T) {
	for _, c := range []struct {
		name, search string
		match        bool
		first        string // the entry the space is listed at
	}{
		{"prod-payments-eu", "pay", true, "payments"},
		{"prod-payments-eu", "PAY", true, "payments"},
		{"prod-payments-eu", "ments", false, ""},       // not mid-word
		{"prod-payments-eu", "prod-pay", true, "prod"}, // read under the longer word
		{"prod-payments-eu", "eu prod", true, "prod"},
		{"prod-payments-eu", "prod-us", false, ""},
		{"PaymentsAPI2", "api", true, "api"},
		{"PaymentsAPI2", "paymentsapi", false, ""},
		{"PaymentsAPI2", "PaymentsA", true, "payments"}, // payments, then a begins api
		{"payroll-payments", "pay", true, "payments"},   // listed once, at the smaller word
		{"eu2", "2", true, "2"},
	} {
		search := SearchWords(c.search)
		words := NameWords(c.name)
		if got := MatchesWords(words, search); got != c.match {
			t.Errorf("%q searched for %q: match %t, want %t", c.name, c.search, got, c.match)
		}
		if c.match {
			if got := FirstWordWith(words, DrivingWord(search)); got != c.first {
				t.Errorf("%q searched for %q: listed at %q, want %q", c.name, c.search, got, c.first)
			}
		}
	}
	if got := SearchWords(" -_. "); len(got) != 0 {
		t.Errorf("a search of separators has words %q", got)
	}
	if got := DrivingWord([]string{"eu", "pay", "abc"}); got != "pay" {
		t.Errorf("DrivingWord = %q, want the first longest", got)
	}
}
